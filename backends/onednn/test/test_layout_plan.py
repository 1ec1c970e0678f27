# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The ahead-of-time layout plan (`_passes/plan_layouts.py`): what it decides, and that the runtime follows it.

The decisions are read from lowered payloads. The runtime side runs programs with oneDNN's verbose
trace: a value planned plain is converted once, right after the step computing it (or written plain
by a pooling), a plan overridden by hand is honoured, and programs with and without a plan agree with
eager PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from executorch.backends.onednn._passes import plan_layouts
from executorch.backends.onednn.serialization.payload import Graph
from executorch.backends.onednn.serialization.schema import BinaryAlg, Layout, StepKind
from support import Fn, Record, execute_traced, preprocessed_with
from tester import DEFAULT_TOLERANCE, flatten_outputs, lower, mismatch
from torch import nn

NATIVE, PLAIN = Layout.NATIVE, Layout.PLAIN


def planned(graph: Graph) -> list[tuple[str, Layout]]:
    """(step kind, layout of its first output) per step."""
    return [(step.kind.name.lower(), graph.values[step.outputs[0]].layout) for step in graph.steps]


def payload(model: nn.Module, *shapes: tuple[int, ...]) -> Graph:
    torch.manual_seed(0)
    (graph,) = lower(model.eval(), tuple(torch.randn(s) for s in shapes)).payloads()
    return graph


def conv_pool_classifier() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 4),
    )


def test_values_read_only_by_plain_only_steps_are_plain_the_rest_native() -> None:
    graph = payload(conv_pool_classifier(), (1, 8, 8, 8))
    assert planned(graph) == [
        ("convolution", NATIVE),
        ("pooling", NATIVE),
        ("convolution", NATIVE),
        ("pooling", NATIVE),  # read by a reshape: a view of channels-last memory
        ("reshape", PLAIN),  # read by the matmul only
        ("matmul", NATIVE),  # written plain anyway
    ], planned(graph)


@pytest.mark.parametrize(
    ("forward", "expected"),
    [
        (lambda m, x: torch.softmax(m.parts.a(x), 1), [("convolution", PLAIN), ("softmax", NATIVE)]),
        (lambda m, x: m.parts.a(x)[:, :4] * 2, [("convolution", PLAIN), ("reorder", NATIVE), ("eltwise", NATIVE)]),
        (lambda m, x: m.parts.a(x), [("convolution", PLAIN)]),
        (
            lambda m, x: then_return(m.parts.a(x), lambda y: torch.softmax(m.parts.b(y), 1)),
            [("convolution", NATIVE), ("convolution", PLAIN), ("softmax", NATIVE)],
        ),
    ],
    ids=["read_by_softmax", "sliced", "graph_output", "output_also_read_by_a_convolution"],
)
def test_a_convolutions_result_is_plain_when_nothing_reads_it_natively(
    forward: Callable[..., object], expected: list[tuple[str, Layout]]
) -> None:
    model = Fn(forward, a=nn.Conv2d(8, 8, 3, padding=1), b=nn.Conv2d(8, 8, 1))
    assert planned(payload(model, (1, 8, 6, 6))) == expected


def returned_conv_then(op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> nn.Module:
    """x op conv(x), the convolution's result also returned so the op cannot become its post-op."""
    return Fn(lambda m, x: then_return(m.parts.conv(x), lambda y: op(x, y)), conv=nn.Conv2d(8, 8, 3, padding=1))


def then_return(y: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return y, fn(y)


@pytest.mark.parametrize(
    ("op", "alg", "swapped"),
    [(torch.add, BinaryAlg.ADD, True), (torch.mul, BinaryAlg.MUL, True), (torch.sub, BinaryAlg.SUB, False)],
    ids=["add", "mul", "sub"],
)
def test_a_commutative_binary_takes_its_native_operand_first(
    op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], alg: BinaryAlg, swapped: bool
) -> None:
    graph = payload(returned_conv_then(op), (1, 8, 6, 6))
    (binary,) = [s for s in graph.steps if s.kind == StepKind.BINARY]
    (conv,) = [s for s in graph.steps if s.kind == StepKind.CONVOLUTION]
    assert binary.ints["alg"] == [alg]
    assert binary.inputs[:2] == ([conv.outputs[0], graph.inputs[0]] if swapped else [graph.inputs[0], conv.outputs[0]])


def test_planning_again_gives_the_same_plan() -> None:
    graph = payload(conv_pool_classifier(), (1, 8, 8, 8))
    before = planned(graph)
    assert planned(plan_layouts(graph)) == before


# --- the runtime follows the plan --------------------------------------------------------------------
def convnext_block() -> nn.Module:
    """Depthwise conv, permute to NHWC, layer norm and an MLP over channels, permute back, residual."""

    def forward(m: Fn, x: torch.Tensor) -> torch.Tensor:
        p = m.parts
        y = p.dw(p.stem(x)).permute(0, 2, 3, 1)
        y = p.down(nn.functional.gelu(p.up(p.norm(y))))
        return p.stem(x) + y.permute(0, 3, 1, 2)

    return Fn(
        forward,
        stem=nn.Conv2d(8, 16, 1),
        dw=nn.Conv2d(16, 16, 7, padding=3, groups=16),
        norm=nn.LayerNorm(16),
        up=nn.Linear(16, 64),
        down=nn.Linear(64, 16),
    )


def run_variant(
    model: nn.Module, shape: tuple[int, ...], plan: Callable[[Graph], Graph] | None = None
) -> tuple[Graph, list[Record]]:
    """Outputs against eager, the payload and the runtime trace; `plan` replaces plan_layouts."""
    torch.manual_seed(0)
    model = model.eval()
    inputs = (torch.randn(shape),)
    with torch.no_grad():
        expected = flatten_outputs(model(*inputs))
    lowered = lower(model, inputs)
    buffer, (graph,) = lowered.buffer, lowered.payloads()
    if plan is not None:
        variant = preprocessed_with(lowered, "plan_layouts", plan)
        buffer, graph = variant.buffer, variant.graph
    outputs, trace = execute_traced(buffer, inputs)
    error = mismatch("program", outputs, expected, DEFAULT_TOLERANCE)
    assert error is None, error
    return graph, trace


def test_a_permute_of_a_native_result_to_nhwc_is_free_where_onednn_computes_channels_last() -> None:
    graph, trace = run_variant(convnext_block(), (1, 8, 10, 10))
    (dw,) = [s for s in graph.steps if s.kind == StepKind.CONVOLUTION and s.ints["groups"] == [16]]
    assert graph.values[dw.outputs[0]].layout == NATIVE, "read by a permute, not by a plain-only step"
    (dw_at,) = [i for i, r in enumerate(trace) if r.primitive == "convolution" and r.problem.startswith("g16")]
    (norm_at,) = [i for i, r in enumerate(trace) if r.primitive == "layer_normalization"]
    copies = [r for r in trace[dw_at:norm_at] if r.primitive == "reorder"]
    channels_last = dict(trace[dw_at].layouts)["dst"] == "acdb"  # oneDNN's choice on AVX2 and newer
    assert len(copies) == (0 if channels_last else 1), f"between depthwise and layer norm: {copies}"
    assert dict(trace[norm_at].layouts)["src"] == "abcd", trace[norm_at]


def with_layout(kind: StepKind, index: int, layout: Layout) -> Callable[[Graph], Graph]:
    """plan_layouts, then the output of the index-th step of `kind` set to `layout` by hand."""

    def plan(graph: Graph) -> Graph:
        plan_layouts(graph)
        step = [s for s in graph.steps if s.kind == kind][index]
        graph.values[step.outputs[0]].layout = layout
        return graph

    return plan


def conv_chain() -> nn.Module:
    return nn.Sequential(*(nn.Conv2d(cin, 16, 3, padding=1) for cin in (3, 16, 16)))


def test_a_value_planned_plain_is_converted_right_after_its_step() -> None:
    _, trace = run_variant(conv_chain(), (1, 3, 12, 12), with_layout(StepKind.CONVOLUTION, 1, PLAIN))
    second = [i for i, r in enumerate(trace) if r.primitive == "convolution"][1]
    after = trace[second + 1]
    assert after.primitive == "reorder" and dict(after.layouts)["dst"] == "abcd", "\n".join(map(str, trace))


def test_the_plan_converts_once_where_only_plain_steps_read() -> None:
    """A convolution's result read by a softmax is converted right after the convolution; a pooling's
    result read by a softmax is written plain by the pooling itself."""
    model = Fn(
        lambda m, x: (torch.softmax(m.parts.a(x), 1), torch.softmax(m.parts.pool(m.parts.b(x)), 1)),
        a=nn.Conv2d(8, 8, 3, padding=1),
        b=nn.Conv2d(8, 8, 3, padding=1),
        pool=nn.MaxPool2d(2),
    )
    graph, trace = run_variant(model, (1, 8, 10, 10))
    assert [layout for _, layout in planned(graph)] == [PLAIN, NATIVE, NATIVE, PLAIN, NATIVE], planned(graph)
    into_plain = [i for i, r in enumerate(trace) if r.primitive == "reorder" and dict(r.layouts)["dst"] == "abcd"]
    first_conv = next(i for i, r in enumerate(trace) if r.primitive == "convolution")
    assert into_plain == [first_conv + 1], "\n".join(map(str, trace))
    pool = next(r for r in trace if r.primitive == "pooling")
    assert dict(pool.layouts)["dst"] == "abcd", "\n".join(map(str, trace))


def clear_plan(graph: Graph) -> Graph:
    for value in graph.values:
        value.layout = NATIVE
    return graph


@pytest.mark.parametrize(
    "build",
    [conv_pool_classifier, convnext_block, lambda: returned_conv_then(torch.add)],
    ids=["classifier", "convnext_block", "add_of_input_and_conv"],
)
def test_programs_with_and_without_a_plan_agree_with_eager(build: Callable[[], nn.Module]) -> None:
    shape = (1, 8, 10, 10)
    planned_graph, _ = run_variant(build(), shape)
    unplanned_graph, _ = run_variant(build(), shape, clear_plan)
    assert any(v.layout == PLAIN for v in planned_graph.values)
    assert all(v.layout == NATIVE for v in unplanned_graph.values)
