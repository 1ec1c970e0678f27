# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The self-contained HTML report of `inspect`: tables, and each method drawn as an SVG graph whose boxes
are its instructions in execution order (green: oneDNN, grey: ExecuTorch's kernels) and whose edges
follow the values from the instruction that last wrote them to those that read them."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

BOX_WIDTH, BOX_HEIGHT, GAP, MARGIN = 360, 34, 22, 90
DELEGATED, LEFT = "#3c9d5d", "#8a8f98"


def _edges(method: dict[str, Any]) -> list[tuple[int, int]]:
    """(producer, consumer) instruction indices; -1 is the method's inputs, len(...) its outputs."""
    writer = {value: -1 for value in method["inputs"]}
    edges = set()
    instructions = method["instructions"]
    for index, instruction in enumerate(instructions):
        args = instruction["args"]
        split = len(args) - instruction["outputs"]
        for value in args[:split]:
            if value in writer:
                edges.add((writer[value], index))
        for value in args[split:]:
            writer[value] = index
    edges.update((writer[value], len(instructions)) for value in method["outputs"] if value in writer)
    return sorted(edges)


def _svg(method: dict[str, Any]) -> str:
    instructions = method["instructions"]
    rows = len(instructions) + 2  # inputs, instructions, outputs
    height = rows * (BOX_HEIGHT + GAP) + GAP
    width = BOX_WIDTH + 2 * MARGIN

    def top(row: int) -> int:
        return GAP + row * (BOX_HEIGHT + GAP)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">']
    parts.append(
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>'
    )
    for producer, consumer in _edges(method):
        start_y, end_y = top(producer + 1) + BOX_HEIGHT, top(consumer + 1)
        if consumer == producer + 1:
            x = MARGIN + BOX_WIDTH // 2
            parts.append(
                f'<line x1="{x}" y1="{start_y}" x2="{x}" y2="{end_y}" stroke="#555" marker-end="url(#arrow)"/>'
            )
            continue
        bend = MARGIN - 12 - 6 * min(consumer - producer, 10)
        left = MARGIN
        parts.append(
            f'<path d="M {left} {start_y - BOX_HEIGHT // 2} C {bend} {start_y}, {bend} {end_y}, {left} '
            f'{end_y + BOX_HEIGHT // 2}" fill="none" stroke="#555" marker-end="url(#arrow)"/>'
        )
    boxes = (
        [("inputs", "#ffffff", "")]
        + [
            (
                instruction["label"],
                DELEGATED if instruction["delegated"] else LEFT,
                _tooltip(instruction),
            )
            for instruction in instructions
        ]
        + [("outputs", "#ffffff", "")]
    )
    for row, (label, color, tooltip) in enumerate(boxes):
        text_color = "#000" if color == "#ffffff" else "#fff"
        parts.append(
            f'<g><title>{html.escape(tooltip or label)}</title><rect x="{MARGIN}" y="{top(row)}" width="{BOX_WIDTH}" '
            f'height="{BOX_HEIGHT}" rx="6" fill="{color}" stroke="#333"/><text x="{MARGIN + BOX_WIDTH // 2}" '
            f'y="{top(row) + BOX_HEIGHT // 2 + 5}" text-anchor="middle" font-size="13" fill="{text_color}">'
            f"{html.escape(_short(label, row, instructions))}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _short(label: str, row: int, instructions: list[dict[str, Any]]) -> str:
    if 0 < row <= len(instructions) and instructions[row - 1]["delegated"]:
        steps = sum(instructions[row - 1]["detail"]["steps"].values())
        return f"[{row - 1}] oneDNN subgraph: {steps} step(s)"
    return f"[{row - 1}] {label}" if 0 < row <= len(instructions) else label


def _tooltip(instruction: dict[str, Any]) -> str:
    detail = instruction["detail"]
    if instruction["delegated"]:
        steps = ", ".join(f"{kind.lower()} x{count}" for kind, count in detail["steps"].items())
        return f"{steps}; weights {detail['weight_bytes']} bytes"
    return detail.get("why", "")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def write_html(report: dict[str, Any], path: Path) -> None:
    sections = []
    for method in report["methods"]:
        instructions = method["instructions"]
        delegated = sum(1 for i in instructions if i["delegated"])
        rows = [
            [number, "oneDNN" if i["delegated"] else "ExecuTorch", i["label"], _tooltip(i)]
            for number, i in enumerate(instructions)
        ]
        sections.append(
            f"<h2>method {html.escape(method['name'])}</h2><p>{len(instructions)} instruction(s): {delegated} "
            f"oneDNN subgraph(s), {len(instructions) - delegated} op(s) left to ExecuTorch's kernels.</p>"
            + _table(["#", "runs in", "what", "detail"], rows)
            + f'<div class="graph">{_svg(method)}</div>'
        )
    if report["reasons"]:
        rows = [[entry["node"], entry["reason"]] for entry in report["reasons"]]
        sections.append("<h2>Why the partitioner left these nodes</h2>" + _table(["node", "reason"], rows))
    if report["comparison"]:
        rows = [
            [row["subgraph"], row["edge_ops"], f"{row['max_abs_diff']:.3g}", f"{row['max_rel_diff']:.3g}"]
            for row in report["comparison"]
        ]
        sections.append(
            "<h2>oneDNN subgraphs against their edge ops</h2>"
            + _table(["subgraph", "edge ops", "max |diff|", "max |diff| / max |reference|"], rows)
        )
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{background:#eee}"
        ".legend span{display:inline-block;padding:.2em .6em;color:#fff;margin-right:.5em}"
    )
    legend = (
        f'<p class="legend"><span style="background:{DELEGATED}">oneDNN delegate</span>'
        f'<span style="background:{LEFT}">ExecuTorch kernels</span></p>'
    )
    title = html.escape(f"executorch-onednn inspect: {report['pte']}")
    path.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style></head>"
        f"<body><h1>{title}</h1>{legend}{''.join(sections)}</body></html>"
    )
