# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The command line (`executorch-onednn`, `python -m executorch.backends.onednn`) on small models: every
subcommand, the HTML report's content, and the errors a user can fix."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from executorch.backends.onednn.cli import main
from executorch.backends.onednn.cli.zoo import MODELS

# A module of the user's own, with an op oneDNN has no rule for between two linear layers.
USER_MODULE = """
import torch
from torch import nn


class WithCumsum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cumsum(torch.relu(self.fc(x)), dim=-1))


def build():
    torch.manual_seed(0)
    return WithCumsum().eval(), (torch.randn(4, 16),)
"""


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(arg) for arg in args])
    except SystemExit as exit:  # argparse's own errors
        code = int(exit.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "user_model.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    yield "user_model:build"
    sys.modules.pop("user_model", None)


def test_export_run_inspect_and_bench_a_zoo_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pte = tmp_path / "mlp.pte"
    code, out, _ = _cli(capsys, "export", "mlp", "-o", pte)
    assert code == 0 and pte.exists() and "0 op(s) left to ExecuTorch" in out
    model, (x,) = MODELS["mlp"]()
    torch.save(x, tmp_path / "x.pt")
    code, out, _ = _cli(capsys, "run", pte, "--inputs", tmp_path / "x.pt", "--save", tmp_path / "y.pt")
    assert code == 0 and "output 0: float32" in out
    (y,) = torch.load(tmp_path / "y.pt")
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-5)
    code, out, _ = _cli(capsys, "inspect", pte, "--html", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert code == 0 and "1 oneDNN subgraph(s), 0 left to ExecuTorch" in out and "matmul x" in out
    page = (tmp_path / "r.html").read_text()
    assert "<svg" in page and "oneDNN subgraph" in page and "method forward" in page
    report = json.loads((tmp_path / "r.json").read_text())
    (instruction,) = report["methods"][0]["instructions"]
    assert instruction["delegated"] and instruction["detail"]["weight_bytes"] > 0
    code, out, err = _cli(capsys, "bench", pte, "--runs", "3", "--threads", "2", "--out", tmp_path / "bench")
    assert code == 0 and "ms median" in out and "3/3" in err  # the progress bar, finished
    assert "| mlp.pte |" in (tmp_path / "bench" / "results.md").read_text()
    assert (tmp_path / "bench" / "latency.png").read_bytes()[:4] == b"\x89PNG"


def test_inspect_says_why_an_op_was_left_and_compares_the_subgraphs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], user_module: str
) -> None:
    pte = tmp_path / "user.pte"
    assert _cli(capsys, "export", user_module, "-o", pte)[0] == 0
    assert Path(f"{pte}.onednn.json").exists()
    html = tmp_path / "user.html"
    code, out, _ = _cli(capsys, "inspect", pte, "--html", html, "--compare", "--model", user_module)
    assert code == 0, out
    assert "2 oneDNN subgraph(s), 1 left to ExecuTorch" in out
    assert "aten::cumsum.out (oneDNN has no rule for aten::cumsum)" in out
    assert "aten_cumsum_default: no oneDNN rule" in out
    page = html.read_text()
    assert "aten::cumsum" in page and "Why the partitioner left these nodes" in page
    assert page.count("oneDNN subgraph:") == 2 and "against their edge ops" in page
    diffs = [line for line in out.splitlines() if line.strip().startswith("subgraph ")]
    assert len(diffs) == 2
    for line in diffs:
        assert float(line.split("max |diff| ")[1].split(",")[0]) < 1e-4, line


def test_export_bf16_with_dynamic_batch_and_external_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pte = tmp_path / "dyn.pte"
    code, out, _ = _cli(
        capsys, "export", "mlp", "-o", pte, "--precision", "bf16", "--dynamic", "0:0:1:16", "--external-weights"
    )
    assert code == 0 and pte.with_suffix(".ptd").exists(), out
    from executorch.backends.onednn.cli._common import load_program

    program = load_program(pte)  # finds dyn.ptd next to it
    method = program.load_method("forward")
    model, _ = MODELS["mlp"]()
    for batch in (1, 16):
        x = torch.randn(batch, 64)
        (y,) = method.execute([x])
        with torch.no_grad():
            torch.testing.assert_close(y, model(x), rtol=3e-2, atol=3e-2)
    del method


def test_bench_a_model_across_backends_writes_the_table_and_the_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "bench", "--model", "mlp", "--runs", "3", "--out", tmp_path)
    assert code == 0, out
    table = (tmp_path / "results.md").read_text()
    for label in ("ExecuTorch + oneDNN |", "ExecuTorch + oneDNN, precision=bf16", "ExecuTorch + XNNPACK"):
        assert label in table
    assert (tmp_path / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.pte"], "missing.pte does not exist"),
        (["export", "no_such_model"], "unknown model 'no_such_model'"),
        (["export", "mlp", "--shape", "8xabc"], "shape '8xabc'"),
        (["export", "mlp", "--dynamic", "0:5:1:8"], "input 0 has no dim 5"),
        (["export", "no_such_module:build"], "cannot import 'no_such_module'"),
        (["inspect", "{pte}", "--compare"], "--compare needs --model"),
        (["bench"], "give a .pte to time, or --model"),
        (["run", "{pte}", "--inputs", "{wrong}"], "input 0: expected torch.float32 (8, 64), got torch.float32 (2, 3)"),
        (["inspect", "{garbage}"], "not an ExecuTorch program"),
    ],
)
def test_errors_say_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    pte = tmp_path / "mlp.pte"
    assert _cli(capsys, "export", "mlp", "-o", pte)[0] == 0
    torch.save(torch.zeros(2, 3), tmp_path / "wrong.pt")
    (tmp_path / "garbage.pte").write_bytes(b"\x00" * 64)
    paths = {"pte": pte, "wrong": tmp_path / "wrong.pt", "garbage": tmp_path / "garbage.pte"}
    code, _, err = _cli(capsys, *(arg.format(**paths) for arg in args))
    assert code == 2 and message in err, err


def test_the_module_and_the_console_script_run_the_cli() -> None:
    script = Path(sys.executable).parent / "executorch-onednn"
    for command in ([sys.executable, "-m", "executorch.backends.onednn"], [str(script)]):
        result = subprocess.run([*command, "inspect", "--help"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 and "--compare" in result.stdout, result.stderr


def test_inspect_counts_four_bit_weights_at_half_a_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An export-llm program holds S4 constants: inspect reads them as two a byte (it raised KeyError)."""
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig, quantize_

    model = torch.nn.Sequential(torch.nn.Linear(64, 48, bias=False)).eval()
    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
    x = torch.randn(2, 64)
    edge = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[OneDnnPartitioner()])
    pte = tmp_path / "int4.pte"
    pte.write_bytes(edge.to_executorch().buffer)
    code, out, _ = _cli(capsys, "inspect", pte, "--json", tmp_path / "r.json")
    assert code == 0, out
    (instruction,) = json.loads((tmp_path / "r.json").read_text())["methods"][0]["instructions"]
    assert instruction["detail"]["steps"].get("COMPRESSED_MATMUL") == 1
    assert instruction["detail"]["weight_bytes"] == 48 * 64 // 2 + 48 * 2 * 4  # the nibbles, then f32 scales
