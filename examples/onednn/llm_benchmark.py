# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""LLM benchmark: one Llama-3-shaped checkpoint (random weights, seeded, written once) exported by
ExecuTorch's export_llm for XNNPACK and by our `export-llm`, each quantization mode, then timed under
ExecuTorch's runtime:

    scripts/run_benchmark.sh --llm --dim 2048 --layers 16 --flows xnnpack-8da4w,onednn-8da4w

Per flow: .pte size, load time, peak RSS of the process that loads and runs it (prompts of 33 lengths
in all, as a server meets them), prefill tokens/s of a --prompt-token prompt (median of 5 after a
warm-up prefill and decode step), decode tokens/s (median over --decode-steps steps), the logits' error
against the eager fp32 model teacher-forced over --teacher-tokens tokens (each step fed the reference
token; max |difference| / max |reference logit| per position, the mean and the worst over positions;
how often the top token agrees), the error of the last logits of every prompt of 2 to --teacher-tokens
tokens of --error-sequences random sequences prefilled at once (the mean over those prompts of that
max relative error and of the RMS one, |difference| / |reference logits|: the largest of 32000
differences moves with single roundings, their norm much less), and the weight bytes one decode step
streams per second, against the machine's memory bandwidth measured here (torch sum over 1 GiB on
--threads threads, best of 5). Every .pte is loaded and run in a fresh process; exports
are cached in --work-dir. Writes a markdown table to --out (and stdout).

The eager-* flows time nothing: they are the errors of the mode's own arithmetic, torchao's
quantized modules as export_llm makes them (its `quantize` source transformation) run in PyTorch, the
yardstick for how closely a delegate computes the program it was given; with one in --flows, the
table's last column is each flow of that mode's prompt logits against it.

The measuring processes run with OMP_NUM_THREADS=1: the attention of export_llm's programs
(llama::custom_sdpa, from the executorch wheel's custom-ops library, which links torch's MKL) calls MKL's
gemm from ExecuTorch's pool threads, and each would start an OpenMP team of every core whose threads
spin between calls, taking the cores from whichever delegate runs next. On the 2-core Xeon of
BENCHMARKS.md that cost XNNPACK's 8da4w decode 3x (10 against 32 tokens/s) and ours 1.7x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class LlmFlow:
    name: str
    backend: str  # "xnnpack", "onednn", or "eager" (PyTorch runs the quantized model: errors only)
    qmode: str | None
    precision: str = "fp32"  # ours: the partitioner's precision
    int4_products: str = "fast"  # ours: set_int4_products() for the run
    exported_as: str | None = None  # the flow whose .pte it runs, when not its own
    group_scales: str = "bf16"  # ours: export-llm's --group-scales (4-bit modes)

    def pte_name(self, group_size: int) -> str:
        name = f"{self.exported_as or self.name}-g{group_size}"
        if self.backend == "onednn" and self.qmode in ("8da4w", "4w") and self.group_scales == "bf16":
            name += "-bf16-scales"  # not the f32 scales that export-llm wrote before it took bf16
        return name + ".pte"


FLOWS = {
    flow.name: flow
    for flow in (
        LlmFlow("xnnpack-fp32", "xnnpack", None),
        LlmFlow("xnnpack-8da4w", "xnnpack", "8da4w"),
        LlmFlow("onednn-fp32", "onednn", None),
        LlmFlow("onednn-8da4w", "onednn", "8da4w"),
        LlmFlow("onednn-8da4w-exact", "onednn", "8da4w", int4_products="exact", exported_as="onednn-8da4w"),
        LlmFlow("onednn-8da4w-f32-scales", "onednn", "8da4w", group_scales="f32"),
        LlmFlow("onednn-4w", "onednn", "4w"),
        LlmFlow("onednn-4w-bf16", "onednn", "4w", "bf16"),
        LlmFlow("onednn-int8", "onednn", "int8"),
        LlmFlow("onednn-bf16", "onednn", None, "bf16"),
        LlmFlow("eager-8da4w", "eager", "8da4w"),
    )
}


def params_of(args: argparse.Namespace) -> dict[str, object]:
    """Llama 3.2 1B's shape (GQA 4:1, SwiGLU of 4x, rope theta 5e5) at the asked width and depth."""
    return {
        "dim": args.dim,
        "n_layers": args.layers,
        "n_heads": args.dim // 64,
        "n_kv_heads": args.dim // 256,
        "vocab_size": args.vocab,
        "ffn_dim_multiplier": 1.5,
        "multiple_of": 256,
        "norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "use_scaled_rope": True,
    }


def write_checkpoint(folder: Path, args: argparse.Namespace) -> None:
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    if (folder / "model.pth").is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    params = params_of(args)
    torch.manual_seed(args.seed)
    model = construct_transformer(ModelArgs(**params, max_seq_len=args.max_seq_len, max_context_len=args.max_seq_len))
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:  # a scale that keeps activations O(1) through the layers
                parameter.normal_(0, 1.0 / parameter.shape[-1] ** 0.5)
    torch.save(model.state_dict(), folder / "model.pth.partial")
    (folder / "params.json").write_text(json.dumps(params))
    (folder / "model.pth.partial").rename(folder / "model.pth")


def export(flow: LlmFlow, checkpoint: Path, pte: Path, args: argparse.Namespace) -> float:
    overrides = [
        f"base.params={checkpoint / 'params.json'}",
        f"base.checkpoint={checkpoint / 'model.pth'}",
        "model.use_kv_cache=True",
        "model.use_sdpa_with_kv_cache=True",
        f"export.max_seq_length={args.max_seq_len}",
        f"export.max_context_length={args.max_seq_len}",
        f"export.output_name={pte}",
    ]
    if flow.qmode:
        overrides += [f"quantization.qmode={flow.qmode}", f"quantization.group_size={args.group_size}"]
    if flow.backend == "xnnpack":
        command = [sys.executable, "-m", "executorch.extension.llm.export.export_llm", *overrides]
        command.append("backend.xnnpack.enabled=True")
    else:
        command = [sys.executable, "-m", "executorch.backends.onednn", "export-llm", *overrides]
        command += [f"--precision={flow.precision}", f"--group-scales={flow.group_scales}"]
    start = time.perf_counter()
    # In the checkpoint folder: export_llm (hydra) writes its run logs under ./outputs/ of its cwd.
    subprocess.run(command, check=True, cwd=checkpoint, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def eager_model(checkpoint: Path, args: argparse.Namespace, qmode: str | None = None) -> object:
    """The checkpoint's model in PyTorch, every position's logits out; quantized as export_llm does
    for `qmode`."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params = json.loads((checkpoint / "params.json").read_text())
    model = construct_transformer(
        ModelArgs(**params, max_seq_len=args.max_seq_len, max_context_len=args.max_seq_len, generate_full_logits=True)
    ).eval()
    model.load_state_dict(torch.load(checkpoint / "model.pth", mmap=True), strict=False, assign=True)
    if qmode:
        from executorch.examples.models.llama.source_transformation.quantize import quantize

        model = quantize(model, qmode, group_size=args.group_size)
    return model


def error_sequences(args: argparse.Namespace) -> object:
    """The token sequences the errors are measured over, [--error-sequences, --teacher-tokens]."""
    import torch

    return torch.stack(
        [
            torch.randint(0, args.vocab, (args.teacher_tokens,), generator=torch.Generator().manual_seed(2 + index))
            for index in range(args.error_sequences)
        ]
    )


def logits_error(logits: object, expected: object) -> tuple[float, float]:
    """Max |difference| / max |expected| and |difference| / |expected| of one position's logits."""
    difference = logits.double() - expected.double()
    return float(difference.abs().max() / expected.abs().max()), float(difference.norm() / expected.double().norm())


def error_numbers(decode_rows: list, prefill_rows: list[list], expected: object) -> dict[str, float]:
    """decode_rows: the teacher-forced logits of the first sequence, a position each; prefill_rows[s]:
    the last logits of sequence s's prompts of 2, 3, ... tokens."""
    decode = [logits_error(row, expected[0][position])[0] for position, row in enumerate(decode_rows)]
    agree = sum(int(row.argmax()) == int(expected[0][position].argmax()) for position, row in enumerate(decode_rows))
    prefill = [
        logits_error(row, expected[sequence][length])
        for sequence, rows in enumerate(prefill_rows)
        for length, row in enumerate(rows, start=1)
    ]
    return {
        "error_mean": statistics.mean(decode),
        "error_max": max(decode),
        "top1_agreement": agree / len(decode_rows),
        "prefill_error_max": statistics.mean(error for error, _ in prefill),
        "prefill_error_rms": statistics.mean(error for _, error in prefill),
    }


def prompt_logits_file(checkpoint: Path, flow_name: str) -> Path:
    """Where a flow's measuring process saves its prompt logits (--prompt-logits) for from_eager()."""
    return checkpoint / f"prompt-logits-{flow_name}.pt"


def save_prompt_logits(prefill_rows: list[list], args: argparse.Namespace) -> None:
    """The prompts' last logits, [sequences, lengths, vocab], where --prompt-logits asks."""
    import torch

    if args.prompt_logits:
        torch.save(torch.stack([torch.stack(rows) for rows in prefill_rows]), args.prompt_logits)


def from_eager(logits: Path, eager: Path) -> dict[str, float]:
    """How far a flow's prompt logits are from the eager quantized model's: the means over the prompts
    of logits_error() against them."""
    import torch

    errors = [
        logits_error(row, expected)
        for row, expected in zip(torch.load(logits).flatten(0, 1), torch.load(eager).flatten(0, 1))
    ]
    return {
        "from_eager_max": statistics.mean(error for error, _ in errors),
        "from_eager_rms": statistics.mean(error for _, error in errors),
    }


def measure_eager(qmode: str, checkpoint: Path, reference: Path, args: argparse.Namespace) -> dict[str, float]:
    """The errors of the quantized model run in PyTorch: each position of one forward pass over a
    sequence is what a teacher-forced step and a prompt ending there compute (the activations are
    quantized per token)."""
    import torch

    torch.set_num_threads(args.threads)
    model = eager_model(checkpoint, args, qmode)
    expected, tokens = torch.load(reference)
    with torch.no_grad():
        rows = [model(sequence[None])[0].float() for sequence in tokens]
    prefill_rows = [list(logits[1:]) for logits in rows]
    save_prompt_logits(prefill_rows, args)
    return error_numbers(list(rows[0]), prefill_rows, expected)


def measure(pte: Path, reference: Path, args: argparse.Namespace) -> dict[str, float]:
    """In this (fresh) process: load, prefill, decode, teacher-forced logits."""
    import executorch.backends.onednn
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
    import torch
    from executorch.backends.onednn import set_int4_products, set_num_threads
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    torch.set_num_threads(1)
    set_num_threads(args.threads)
    set_int4_products(args.int4_products)
    portable_lib._unsafe_reset_threadpool(args.threads)
    start = time.perf_counter()
    method = Runtime.get().load_program(str(pte)).load_method("forward")
    load_s = time.perf_counter() - start
    generator = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, args.vocab, (1, args.prompt_tokens), generator=generator)
    method.execute([prompt, torch.tensor([0])])  # warm-up: the graphs of both lengths built, pages touched
    method.execute([torch.tensor([[7]]), torch.tensor([args.prompt_tokens])])
    prefill = []
    for _ in range(5):
        start = time.perf_counter()
        method.execute([prompt, torch.tensor([0])])
        prefill.append(time.perf_counter() - start)
    steps = []
    token = torch.tensor([[7]])
    for position in range(args.prompt_tokens, args.prompt_tokens + args.decode_steps):
        start = time.perf_counter()
        method.execute([token, torch.tensor([position])])
        steps.append(time.perf_counter() - start)
    expected, tokens = torch.load(reference)
    decode_rows = []
    for position, token_id in enumerate(tokens[0]):
        (logits,) = method.execute([token_id.reshape(1, 1), torch.tensor([position])])
        decode_rows.append(logits.reshape(-1).float().clone())
    prefill_rows = []
    for sequence in tokens:
        prefill_rows.append([])
        for length in range(2, len(sequence) + 1):
            (logits,) = method.execute([sequence[None, :length], torch.tensor([0])])
            prefill_rows[-1].append(logits.reshape(-1, logits.shape[-1])[-1].float().clone())
    save_prompt_logits(prefill_rows, args)
    return {
        "load_s": load_s,
        "prefill_s": statistics.median(prefill),
        "decode_s": statistics.median(steps),
        "peak_rss_mb": peak_rss_mb(),
        **error_numbers(decode_rows, prefill_rows, expected),
    }


def peak_rss_mb() -> float:
    """This process's resident high-water mark (VmHWM: getrusage's ru_maxrss would carry the parent's
    over fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_bandwidth(threads: int) -> float:
    """GB/s of a sum over 1 GiB of f32, best of 5."""
    import torch

    torch.set_num_threads(threads)
    data = torch.ones(1 << 28)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    return data.nbytes / best / 1e9


def streamed_bytes(pte_bytes: int, flow: LlmFlow, args: argparse.Namespace) -> int:
    """What one decode step reads of the weights: everything but the token embedding table, which it
    gathers one row of (fp32 in every flow here); half of it for unquantized weights under our bf16
    precision, which init packs from the program's f32 into bf16."""
    weights = pte_bytes - args.vocab * args.dim * 4
    return weights // 2 if flow.backend == "onednn" and flow.qmode is None and flow.precision == "bf16" else weights


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--group-size", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--decode-steps", type=int, default=128)
    parser.add_argument("--teacher-tokens", type=int, default=32)
    parser.add_argument("--error-sequences", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flows", default=",".join(FLOWS))
    parser.add_argument("--work-dir", type=Path, default=ROOT / "build" / "llm-benchmark")
    parser.add_argument("--out", type=Path, help="also write the table here")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # internal: time one .pte
    parser.add_argument("--reference", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure-eager", help=argparse.SUPPRESS)  # internal: a qmode's eager errors
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--prompt-logits", type=Path, help=argparse.SUPPRESS)  # internal: where to save them
    parser.add_argument("--int4-products", default="fast", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.reference, args)))
        return 0
    if args.measure_eager:
        print(json.dumps(measure_eager(args.measure_eager, args.checkpoint, args.reference, args)))
        return 0

    flows = [FLOWS[name] for name in args.flows.split(",")]
    shape = f"dim{args.dim}-layers{args.layers}-vocab{args.vocab}-seed{args.seed}"
    checkpoint = args.work_dir / shape
    print(f"checkpoint {checkpoint}", flush=True)
    write_checkpoint(checkpoint, args)
    reference = checkpoint / f"reference-{args.error_sequences}x{args.teacher_tokens}.pt"
    if not reference.is_file():
        import torch

        tokens = error_sequences(args)
        with torch.no_grad():
            model = eager_model(checkpoint, args)
            torch.save((torch.stack([model(sequence[None])[0] for sequence in tokens]), tokens), reference)
    ptes = {flow.name: checkpoint / flow.pte_name(args.group_size) for flow in flows}
    for flow in flows:  # every export first: nothing else runs while a flow is timed
        if flow.backend != "eager" and not ptes[flow.name].is_file():
            print(f"exporting {flow.name}", flush=True)
            export(flow, checkpoint, ptes[flow.name], args)
    os.sync()  # the exports' writeback would share the memory bus with the first measurements
    bandwidth = memory_bandwidth(args.threads)
    rows = []
    for flow in flows:
        pte = ptes[flow.name]
        print(f"measuring {flow.name}", flush=True)
        command = [sys.executable, "-m", "examples.onednn.llm_benchmark", "--reference", str(reference)]
        command += ["--threads", str(args.threads), "--vocab", str(args.vocab), "--group-size", str(args.group_size)]
        if flow.backend == "eager":
            command += ["--measure-eager", flow.qmode, "--checkpoint", str(checkpoint)]
        else:
            command += ["--measure", str(pte)]
        command += ["--prompt-tokens", str(args.prompt_tokens), "--decode-steps", str(args.decode_steps)]
        command += ["--int4-products", flow.int4_products]
        command += ["--prompt-logits", str(prompt_logits_file(checkpoint, flow.name))]
        environment = dict(os.environ, OMP_NUM_THREADS="1")  # the module docstring says why
        result = subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True, env=environment)
        numbers = json.loads(result.stdout.strip().splitlines()[-1])
        if flow.backend != "eager":
            size = pte.stat().st_size
            numbers["pte_mb"] = size / 1e6
            numbers["decode_gbs"] = streamed_bytes(size, flow, args) / numbers["decode_s"] / 1e9
        rows.append((flow.name, numbers))
    eager_flows = {flow.qmode: flow.name for flow in flows if flow.backend == "eager"}
    for flow, (name, numbers) in zip(flows, rows):
        if flow.backend != "eager" and flow.qmode in eager_flows:
            eager = prompt_logits_file(checkpoint, eager_flows[flow.qmode])
            numbers.update(from_eager(prompt_logits_file(checkpoint, name), eager))
    lines = [
        f"Llama-3-shaped, dim {args.dim}, {args.layers} layers, vocab {args.vocab}, group {args.group_size}; "
        f"{args.threads} threads; memory bandwidth {bandwidth:.1f} GB/s (sum over 1 GiB)",
        "",
        "| flow | .pte MB | load s | peak RSS MB | prefill tok/s | decode tok/s | decode GB/s (of bandwidth) |"
        " logits error mean / max | top-1 agreement | prompt logits error, max / RMS |"
        " prompt logits from eager-<qmode>, max / RMS |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n in rows:
        timing = (
            f"{n['pte_mb']:.0f} | {n['load_s']:.2f} | {n['peak_rss_mb']:.0f} | "
            f"{args.prompt_tokens / n['prefill_s']:.1f} | {1 / n['decode_s']:.2f} | "
            f"{n['decode_gbs']:.1f} ({n['decode_gbs'] / bandwidth:.0%})"
            if "decode_s" in n
            else "- | - | - | - | - | -"
        )
        lines.append(
            f"| {name} | {timing} | {n['error_mean']:.4e} / {n['error_max']:.4e} | {n['top1_agreement']:.0%} | "
            f"{n['prefill_error_max']:.4e} / {n['prefill_error_rms']:.4e} | "
            + (f"{n['from_eager_max']:.2e} / {n['from_eager_rms']:.2e} |" if "from_eager_max" in n else "- |")
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
