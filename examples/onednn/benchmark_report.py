# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Renders benchmark results (the dict `benchmark.py` writes as results.json): markdown tables, a bar chart
of speed relative to XNNPACK, and the committed BENCHMARKS.md page."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from examples.onednn.benchmark_flows import FLOWS

Results = dict[str, Any]
BASELINE = "xnnpack"
MEMORY_NOTE = (
    "Peak memory: each (model, flow) runs in a fresh process; after its runtime is imported and the inputs "
    "are loaded, the kernel's peak-RSS counter (VmHWM) is reset (/proc/self/clear_refs) and the RSS taken as "
    "the baseline. The figure is the peak RSS over loading the artifact (.pte from its path by ExecuTorch's "
    "loader, .onnx by ONNX Runtime, the pickled module by torch.load), init and all runs, minus that baseline."
)


def _cell(text: str, limit: int = 160) -> str:
    """One line of an error, safe inside a markdown table cell."""
    line = " ".join(text.split())
    line = line if len(line) <= limit else line[: limit - 1] + "…"
    return line.replace("|", "\\|")


def short_reason(entry: dict[str, Any]) -> str:
    """What a failed or skipped flow shows in its cell: the stage and the exception's last line."""
    reason = entry.get("reason", "")
    last = [line for line in reason.strip().splitlines() if line.strip()]
    return f"{entry['status']} ({entry.get('stage', '?')}): {_cell(last[-1] if last else reason)}"


def _ratio(value: float | None) -> str:
    """Two decimals, or two significant digits for the tiny ratios of ExecuTorch without a delegate."""
    if not value:
        return "-"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def _status(entry: dict[str, Any]) -> str:
    return "skipped" if entry["status"] == "skipped" else f"{entry['status']} ({entry['stage']})"


def _speedup(entry: dict[str, Any]) -> str:
    return _ratio(entry.get("vs_xnnpack"))


def _flows_in(results: Results) -> list[str]:
    """The flows to show: those some model did not skip (an unavailable flow is only named in the notes)."""
    entries = [(flow, entry) for model in results["models"].values() for flow, entry in model["flows"].items()]
    shown = {flow for flow, entry in entries if entry["status"] != "skipped"}
    return [name for name in FLOWS if name in shown]


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary_table(results: Results) -> list[str]:
    """Models x flows: speed relative to XNNPACK (xnnpack_ms / flow_ms, > 1 is faster), and XNNPACK's ms."""
    flows = [name for name in _flows_in(results) if name != BASELINE]
    header = ["model", "XNNPACK ms", *(FLOWS[name].label for name in flows)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model in results["models"].values():
        baseline = model["flows"].get(BASELINE, {})
        ms = f"{baseline['median_ms']:.2f}" if baseline.get("status") == "ok" else "-"
        entries = _entries(model, flows)
        cells = [_speedup(e) if e["status"] == "ok" else _status(e) for e in entries]
        lines.append("| " + " | ".join([model["label"], ms, *cells]) + " |")
    ratios = [_ratios(results, name) for name in flows]
    cells = [f"{_ratio(geometric_mean(r))} ({len(r)} models)" if r else "-" for r in ratios]
    lines.append("| " + " | ".join(["**geometric mean** (over the models that ran)", "", *cells]) + " |")
    return lines


def _entries(model: dict[str, Any], flows: list[str]) -> list[dict[str, Any]]:
    return [model["flows"].get(name, {"status": "-", "stage": "not asked"}) for name in flows]


def _ratios(results: Results, flow: str) -> list[float]:
    entries = (model["flows"].get(flow, {}) for model in results["models"].values())
    return [e["vs_xnnpack"] for e in entries if e.get("vs_xnnpack")]


def _median(model: dict[str, Any], flow: str) -> float | None:
    entry = model["flows"].get(flow, {})
    return entry["median_ms"] if entry.get("status") == "ok" else None


def _speed(peer_ms: float | None, ours_ms: float | None) -> float | None:
    return peer_ms / ours_ms if peer_ms and ours_ms else None


def targets_table(results: Results) -> list[str]:
    """The issues' comparisons: fp32 against the faster of XNNPACK and ONNX Runtime; bf16 (precision="bf16")
    against OpenVINO (bf16 on such CPUs) and against XNNPACK fp32, with the bf16 error against fp32; static
    int8 against XNNPACK's int8; dynamic int8 linears against XNNPACK's dynamic int8; the model in bf16 against
    our fp32 flow."""
    header = ["model", "fp32: ours vs best of XNNPACK/ORT", "bf16: ours vs OpenVINO", "bf16: ours vs XNNPACK fp32",
              "bf16 max rel. error", "int8: ours vs XNNPACK int8", "dynamic int8: ours vs XNNPACK",
              "bf16 model: vs our fp32"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    columns: list[list[float]] = [[], [], [], [], [], []]
    for model in results["models"].values():
        peers = [ms for ms in (_median(model, "xnnpack"), _median(model, "onnxruntime")) if ms]
        speeds = [
            _speed(min(peers) if peers else None, _median(model, "onednn")),
            _speed(_median(model, "openvino"), _median(model, "onednn-bf16")),
            _speed(_median(model, "xnnpack"), _median(model, "onednn-bf16")),
            _speed(_median(model, "xnnpack-int8"), _median(model, "onednn-int8")),
            _speed(_median(model, "xnnpack-dyn-int8"), _median(model, "onednn-dyn-int8")),
            _speed(_median(model, "onednn"), _median(model, "onednn-bf16-model")),
        ]
        for column, speed in zip(columns, speeds):
            if speed:
                column.append(speed)
        bf16 = model["flows"].get("onednn-bf16", {})
        error = f"{bf16['max_rel_error']:.1e}" if bf16.get("status") == "ok" else "-"
        cells = [_ratio(s) if s else "-" for s in speeds]
        lines.append("| " + " | ".join([model["label"], *cells[:3], error, *cells[3:]]) + " |")
    means = [f"{_ratio(geometric_mean(c))} ({len(c)} models)" if c else "-" for c in columns]
    lines.append("| " + " | ".join(["**geometric mean**", *means[:3], "", *means[3:]]) + " |")
    return lines


def baseline_build_table(results: Results) -> list[str]:
    """Each oneDNN flow against its run on the baseline build (--baseline-library), when there was one."""
    flows = [name for name in _flows_in(results) if f"{name}-baseline" in _flows_in(results)]
    if not flows:
        return []
    versions = results["versions"]
    lines = ["", "## This build against the baseline build", ""]
    lines += [
        f"baseline_ms / this_ms, the same .pte on both: above 1 is faster than the baseline. This build: oneDNN "
        f"{versions.get('oneDNN', '?')}; baseline: oneDNN {versions.get('oneDNN (baseline build)', '?')}.",
        "",
        "| model | " + " | ".join(FLOWS[name].label for name in flows) + " |",
        "|---|" + "---|" * len(flows),
    ]
    columns: list[list[float]] = [[] for _ in flows]
    for model in results["models"].values():
        speeds = [model["flows"].get(name, {}).get("vs_baseline_build") for name in flows]
        for column, speed in zip(columns, speeds):
            if speed:
                column.append(speed)
        lines.append("| " + " | ".join([model["label"], *(_ratio(s) for s in speeds)]) + " |")
    means = [f"{_ratio(geometric_mean(c))} (min {_ratio(min(c))})" if c else "-" for c in columns]
    lines.append("| " + " | ".join(["**geometric mean**", *means]) + " |")
    return lines


def detail_table(results: Results) -> list[str]:
    header = ["model", "flow", "median ms", "p10-p90 ms", "IQR ms", "vs XNNPACK", "max rel. error",
              "load+init ms", "peak MiB", "runs", "delegate calls"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    flows = _flows_in(results)
    for model in results["models"].values():
        for name, entry in model["flows"].items():
            if name not in flows:
                continue
            label = FLOWS[name].label
            if entry["status"] != "ok":
                lines.append(f"| {model['label']} | {label} | {short_reason(entry)} |" + " |" * (len(header) - 3))
                continue
            cells = [
                f"{entry['median_ms']:.2f}",
                f"{entry['p10_ms']:.2f}-{entry['p90_ms']:.2f}",
                f"{entry['q3_ms'] - entry['q1_ms']:.2f}",
                _speedup(entry),
                f"{entry['max_rel_error']:.1e}",
                f"{entry['load_ms']:.0f}",
                f"{entry['peak_mib']:.0f}",
                str(entry["runs"]),
                str(entry.get("delegate_calls", "-")),
            ]
            lines.append("| " + " | ".join([model["label"], label, *cells]) + " |")
    return lines


def overhead_table(results: Results) -> list[str]:
    """Per-call overhead of one tiny op (benchmark_overhead.py), when the suite measured it."""
    overhead = results.get("call_overhead")
    if not overhead:
        return []
    lines = ["", "## Per-call overhead", ""]
    if overhead["status"] != "ok":
        return [*lines, f"Not measured: {short_reason(overhead)}"]
    lines += [
        f"One `method.execute()` of a program that is one {overhead['op']}: the best of {overhead['rounds']} "
        f"rounds of {overhead['calls']} calls. The delegate's own cost is that minus the same program without "
        "a delegate (ExecuTorch's portable kernel, which costs next to nothing for 8 floats).",
        "",
        "| flow | us per call | the delegate's own us |",
        "|---|---|---|",
    ]
    for flow, us in overhead["us_per_call"].items():
        own = overhead["delegate_us"].get(flow)
        lines.append(f"| {FLOWS[flow].label} | {us:.1f} | {'-' if own is None else f'{own:.1f}'} |")
    return lines


def machine_lines(results: Results) -> list[str]:
    machine, versions, settings = results["machine"], results["versions"], results["settings"]
    flags = ", ".join(f"{flag} {'yes' if present else 'no'}" for flag, present in machine["flags"].items())
    return [
        f"- Date: {results['date']}",
        f"- CPU: {machine['cpu']}, {machine['cores']} cores ({machine['threads_available']} usable here); {flags}",
        "- Versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()),
        f"- Threads: {settings['threads']} for every runtime; {settings['warmup']} warm-up runs, up to "
        f"{settings['runs']} timed runs (at most {settings['budget_s']:g} s each flow); ExecuTorch without a "
        f"delegate: up to {settings['slow_runs']} runs (first included), {settings['slow_budget_s']:g} s budget",
        f"- Suite wall time: {results['total_s']:.0f} s",
    ]


def _body(results: Results) -> list[str]:
    lines = [*machine_lines(results), "", "## Speed relative to XNNPACK", ""]
    lines += ["xnnpack_ms / flow_ms (median latency): above 1 is faster than XNNPACK.", "", *summary_table(results)]
    lines += ["", "## Against the targets", "", "peer_ms / our_ms: above 1 is faster than the peer.", ""]
    lines += targets_table(results)
    lines += baseline_build_table(results)
    lines += overhead_table(results)
    lines += ["", "## All numbers", "", *detail_table(results), "", MEMORY_NOTE, ""]
    return lines + [f"- {note}" for note in results.get("notes", [])]


def markdown(results: Results) -> str:
    return "\n".join(["# Benchmark results", "", *_body(results)]) + "\n"


def benchmarks_page(results: Results, command: str) -> str:
    """BENCHMARKS.md: the page committed to the repository."""
    lines = [
        "# Benchmarks",
        "",
        "Latency of one inference (batch as listed), fp32 models with random weights; "
        '"precision=bf16" computes them in bf16 inside our delegate (inputs and outputs fp32), and OpenVINO '
        "computes in bf16 on CPUs with AVX512-BF16.",
        "",
    ]
    lines += [*_body(results), "", "## How to reproduce", ""]
    lines += [f"`{command}` (writes `results/<date>/`; `--help` lists the options).", ""]
    return "\n".join(lines)


def _chart_series(results: Results) -> tuple[list[str], dict[str, list[float | str]]]:
    """Column labels (the models, then the geometric mean) and, per drawn flow, its ratio in each column
    or, where it has none, its status ("failed", "skipped")."""
    models = list(results["models"].values())
    series: dict[str, list[float | str]] = {}
    for name in _flows_in(results):
        if name == BASELINE or FLOWS[name].slow:
            continue
        entries = [model["flows"].get(name, {"status": "-"}) for model in models]
        mean = geometric_mean(_ratios(results, name))
        series[name] = [e.get("vs_xnnpack") or e["status"] for e in entries] + [mean or "-"]
    return [model["key"] for model in models] + ["geomean"], series


def bar_chart(results: Results, path: Path) -> None:
    """Grouped bars: per model, each flow's speed relative to XNNPACK (a missing bar: the flow failed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns, series = _chart_series(results)
    width = 0.8 / max(1, len(series))
    figure, axes = plt.subplots(figsize=(max(8.0, 1.2 * len(columns)), 5.0))
    for index, (name, values) in enumerate(series.items()):
        offset = (index - (len(series) - 1) / 2) * width
        drawn = [(column + offset, v) for column, v in enumerate(values) if isinstance(v, float)]
        bars = axes.bar([x for x, _ in drawn], [v for _, v in drawn], width, label=FLOWS[name].label)
        axes.bar_label(bars, fmt="%.2f", fontsize=6, rotation=90, padding=2)
        for column, value in enumerate(values):
            if value == "failed":
                axes.text(column + offset, 0.02, "failed", rotation=90, fontsize=6, ha="center", va="bottom")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_ylabel("speed relative to XNNPACK (xnnpack_ms / flow_ms)")
    axes.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    axes.margins(y=0.15)
    left_out = ", ".join(flow.label for flow in FLOWS.values() if flow.slow)
    threads = results["settings"]["threads"]
    axes.set_title(
        f"fp32 models, {results['machine']['cpu']}, {threads} thread{'s' if threads != 1 else ''} "
        f"(higher is faster; XNNPACK = 1; {left_out} not drawn)",
        fontsize="medium",
    )
    if series:
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


__all__ = ["bar_chart", "benchmarks_page", "geometric_mean", "markdown", "short_reason"]
