# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`executorch-onednn export-llm`: export_llm's configuration and pipeline with our partitioner, run by
ExecuTorch's own `TextLLMRunner`, greedy tokens against the eager model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from executorch.backends.onednn.cli import main

TEXT = "the quick brown fox jumps over the lazy dog and runs"
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A byte-level BPE tokenizer (one token per character) and a small Llama with seeded weights large
    enough that greedy decoding does not settle into a cycle of two tokens."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = tmp_path_factory.mktemp("llm")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=len(set(TEXT)) + 2, special_tokens=["<s>", "</s>"])
    tokenizer.train_from_iterator([TEXT] * 20, trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    params = {
        "dim": 64,
        "n_layers": 2,
        "n_heads": 4,
        "n_kv_heads": 2,
        "vocab_size": tokenizer.get_vocab_size(),
        "multiple_of": 32,
        "norm_eps": 1e-5,
        "rope_theta": 10000.0,
    }
    (folder / "params.json").write_text(json.dumps(params))
    torch.manual_seed(0)
    model = construct_transformer(ModelArgs(**params, max_seq_len=64, max_context_len=64)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.normal_(0, 2.0 / parameter.shape[-1] ** 0.5)
    torch.save(model.state_dict(), folder / "model.pth")
    return {"folder": folder, "tokenizer": tokenizer, "model": model}


@pytest.mark.parametrize("custom_sdpa", [True, False], ids=["llama_custom_sdpa", "sdpa_with_index_put_cache"])
def test_export_llm_pte_generates_the_eager_models_greedy_tokens_under_text_llm_runner(
    checkpoint: dict[str, object], custom_sdpa: bool
) -> None:
    """With `model.use_sdpa_with_kv_cache=True` the delegate runs export_llm's `llama::custom_sdpa` over
    the cache (CACHED_ATTENTION); with False the cache update is an index_put at the prompt's positions
    (index tensors of a dynamic length), which the partitioner claims."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama:: ops of the .pte)
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    folder: Path = checkpoint["folder"]  # type: ignore[assignment]
    tokenizer = checkpoint["tokenizer"]
    metadata = json.dumps({"get_bos_id": tokenizer.token_to_id("<s>"), "get_eos_ids": [tokenizer.token_to_id("</s>")]})
    pte = folder / f"model-{custom_sdpa}.pte"
    status = main(
        [
            "export-llm",
            f"base.params={folder / 'params.json'}",
            f"base.checkpoint={folder / 'model.pth'}",
            "model.use_kv_cache=True",
            f"model.use_sdpa_with_kv_cache={custom_sdpa}",
            "export.max_seq_length=64",
            "export.max_context_length=64",
            f"base.metadata='{metadata}'",  # quoted: a string, not a mapping, as export_llm takes it
            f"export.output_name={pte}",
        ]
    )
    assert status == 0 and pte.is_file()
    if custom_sdpa:  # the attention over the cache is ours; ExecuTorch keeps the cache updates
        from executorch.backends.onednn.serialization.payload import deserialize
        from executorch.backends.onednn.serialization.schema import StepKind
        from executorch.exir._serialize._program import deserialize_pte_binary

        program = deserialize_pte_binary(pte.read_bytes()).program
        operators = {operator.name for plan in program.execution_plan for operator in plan.operators}
        assert "llama::custom_sdpa" not in operators and "llama::update_cache" in operators, operators
        payloads = [deserialize(data.data) for data in program.backend_delegate_data]
        steps = [step.kind for payload in payloads for step in payload.steps]
        assert steps.count(StepKind.CACHED_ATTENTION) == 2  # one per layer
        assert steps.count(StepKind.ROTARY) == 4  # queries and keys of each layer

    prompt = "the quick"
    pieces: list[str] = []
    runner = TextLLMRunner(str(pte), str(folder / "tokenizer.json"))
    runner.generate(prompt, GenerationConfig(max_new_tokens=NEW_TOKENS, temperature=0.0, echo=False), pieces.append)

    tokens = tokenizer.encode(prompt).ids  # the runner prepends no BOS to the prompt here
    end = tokenizer.token_to_id("</s>")
    expected = []
    with torch.no_grad():
        while len(expected) < NEW_TOKENS and tokens[-1] != end:  # the runner stops after an EOS
            logits = checkpoint["model"](torch.tensor([tokens]))  # the last position's logits
            tokens.append(int(logits[0].argmax()))
            expected.append(tokenizer.decode([tokens[-1]], skip_special_tokens=False))
    assert len(set(expected)) > 4, f"the reference decodes a short cycle, a weak check: {expected}"
    assert pieces == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["quantization.qmode=torchao:8da4w"], "not supported by export-llm yet"),
        (["quantization.pt2e_quantize=xnnpack_dynamic"], "not supported by export-llm yet"),
        (["backend.xnnpack.enabled=True"], "export-llm lowers to oneDNN"),
        (["model.no_such_option=1"], "not an LlmConfig"),
        (["model.use_kv_cache"], "KEY=VALUE"),
    ],
)
def test_export_llm_refuses_what_it_cannot_do_in_one_line(
    overrides: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export-llm", *overrides]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and message in error[0], error


@pytest.mark.parametrize(
    ("qmode", "group", "embedding", "group_scales"),
    [("8da4w", 32, "4,32", "f32"), ("4w", 64, None, "bf16"), ("int8", None, "8,0", "bf16")],
)
def test_export_llm_quantized_linears_stay_compressed_and_follow_the_eager_quantized_model(
    checkpoint: dict[str, object], qmode: str, group: int | None, embedding: str | None, group_scales: str
) -> None:
    """export_llm's own quantization of the linear layers: every linear becomes one COMPRESSED_MATMUL
        with 4-bit weights (8-bit for qmode=int8), and the prompt's logits follow the eager quantized model
        (export_llm's pipeline without lowering). A row quantized to int8 moves by a step when an ulp moves it
        across a rounding boundary, so the two agree to ~1e-2 of the logits' magnitude, not to f32 rounding
        (single layers are checked exactly in test_affine_quantization.py; the scales' rounding to bf16, 2^-9
    at most, is far below that); the greedy next token is the same."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
    from executorch.backends.onednn import set_int4_products
    from executorch.backends.onednn.cli._export_llm import read_config
    from executorch.backends.onednn.serialization.payload import deserialize
    from executorch.backends.onednn.serialization.schema import DType, StepKind
    from executorch.examples.models.llama import export_llama_lib as llama
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.runtime import Runtime

    folder: Path = checkpoint["folder"]  # type: ignore[assignment]
    pte = folder / f"model-{qmode}.pte"
    overrides = [
        f"base.params={folder / 'params.json'}",
        f"base.checkpoint={folder / 'model.pth'}",
        "model.use_kv_cache=True",
        "export.max_seq_length=64",
        "export.max_context_length=64",
        f"quantization.qmode={qmode}",
        *([f"quantization.group_size={group}"] if group else []),
        *([f"quantization.embedding_quantize='{embedding}'"] if embedding else []),
    ]
    assert main(["export-llm", *overrides, f"export.output_name={pte}", f"--group-scales={group_scales}"]) == 0

    program = deserialize_pte_binary(pte.read_bytes()).program
    payloads = [deserialize(data.data) for data in program.backend_delegate_data]
    steps = [step for payload in payloads for step in payload.steps]
    linears = [step for step in steps if step.kind == StepKind.COMPRESSED_MATMUL]
    layers = 2  # q, k, v, o and the three of the MLP per layer, and the output projection
    assert len(linears) == 7 * layers + 1
    stored = {payload.values[step.inputs[1]].dtype for payload in payloads for step in payload.steps if step in linears}
    assert stored == {DType.S8 if qmode == "int8" else DType.S4}
    # 4-bit layers keep their group scales in the type asked for; int8 ones f32 whatever was asked.
    scales = {payload.values[step.inputs[2]].dtype for payload in payloads for step in payload.steps if step in linears}
    assert scales == {DType.F32 if qmode == "int8" or group_scales == "f32" else DType.BF16}
    tables = [
        payload.values[step.inputs[0]].dtype
        for payload in payloads
        for step in payload.steps
        if step.kind == StepKind.GATHER
    ]
    assert tables == ([DType.S4 if embedding.startswith("4") else DType.S8] if embedding else [DType.F32])
    manager = llama._prepare_for_llama_export(read_config(None, overrides))
    reference = manager.export().pre_autograd_graph_module
    tokens = torch.tensor([[1, 4, 2, 7, 3, 5]])
    with torch.no_grad():
        expected = reference(tokens, {"input_pos": torch.tensor([0])})
    expected = expected[0] if isinstance(expected, tuple) else expected
    # The prompt's rows in int32 products, as the eager model: AMX's default products for several rows
    # round the weights (widened to s8 per column; test_affine_quantization.py bounds them), which moves
    # a prompt's logits from the eager model's (BENCHMARKS.md).
    set_int4_products("exact")  # read as the method's delegates initialize
    try:
        program = Runtime.get().load_program(str(pte))
        method = program.load_method("forward")
    finally:
        set_int4_products("fast")
    (actual,) = method.execute([tokens, torch.tensor([0])])
    assert float((actual - expected).abs().max() / expected.abs().max()) < 3e-2
    assert int(actual.argmax()) == int(expected.argmax())
