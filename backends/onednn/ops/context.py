# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Turns FX nodes into payload values and steps; shared by the partitioner's checks and preprocess."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal

import sympy
import torch
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from torch.export import ExportedProgram
from torch.fx import Node
from torch.utils._sympy.value_ranges import ValueRanges

from ..serialization.payload import Graph, Step
from ..serialization.schema import MAX_RANK, NO_VALUE, TORCH_TO_DTYPE, DType, StepKind
from ..serialization.shapes import Bounds, dim_of

# Where lowering takes dynamic sizes (the payload records them at "max"; "min" checks the lowering).
Bound = Literal["max", "min"]

SUPPORTED_DTYPES = {torch.float32, torch.bfloat16}
# Quantized activations (between a quantize and a dequantize) exist only inside the delegate.
INT8_DTYPES = {torch.uint8, torch.int8}
# Indices and masks: read and written only by the runtime's host index steps (ops/indexing.py).
HOST_DTYPES = {torch.int64, torch.bool}


class Unsupported(Exception):
    """The runtime cannot execute this node as exported; the message says why."""


def aten_op(target: object) -> object:
    """The ATen overload behind an edge-dialect op (or the target itself)."""
    return target._op if isinstance(target, EdgeOpOverload) else target


def fake_tensor(node: Node) -> torch.Tensor:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        val = val[0]
    if not isinstance(val, torch.Tensor):
        raise Unsupported(f"{node.name} does not produce a tensor")
    return val


def node_dtype(node: Node, dtypes: set[torch.dtype] = SUPPORTED_DTYPES | INT8_DTYPES) -> DType:
    """The payload type of the node's (first) result."""
    dtype = fake_tensor(node).dtype
    if dtype not in dtypes:
        raise Unsupported(f"{node.name} has dtype {dtype}")
    return TORCH_TO_DTYPE[dtype]


def concrete_dims(
    sizes: Sequence[int | torch.SymInt], ranges: dict[sympy.Symbol, ValueRanges], bound: Bound, size_one: bool = False
) -> tuple[int, ...]:
    """Sizes at every dynamic size's maximum (or minimum) in `ranges`; SymDims where dynamic.

    torch.export records a size exported with Dim(min=1) as ranging from 2 (it traces assuming
    sizes other than 0 and 1); `size_one` takes such a range as starting at 1 again."""
    dims: list[int] = []
    for size in sizes:
        if isinstance(size, int):
            dims.append(size)
            continue
        expr = size.node.expr
        bounds: Bounds = {}
        for symbol in expr.free_symbols:
            known = ranges.get(symbol) or size.node.shape_env.var_to_range[symbol]
            if not isinstance(known.upper, sympy.Integer):  # torch's int_oo claims to be a finite integer
                raise Unsupported(f"dynamic size {symbol} has no upper bound; export it with Dim(..., max=N)")
            lower = 1 if size_one and int(known.lower) == 2 else int(known.lower)
            bounds[symbol] = (lower, int(known.upper))
        point = {symbol: bounds[symbol][1 if bound == "max" else 0] for symbol in bounds}
        dims.append(dim_of(int(expr.subs(point)), expr, bounds))
    return tuple(dims)


def same_sizes(a: torch.Size, b: torch.Size) -> bool:
    """Equal sizes, dynamic ones compared by expression (no guard is added to the shape env)."""
    return len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b))


def _is_quantize(node: Node) -> bool:
    return (
        node.op == "call_function"
        and aten_op(node.target) == torch.ops.quantized_decomposed.quantize_per_tensor.default
    )


# Subgraphs computing constants (a causal mask from arange/where, ...) are folded ahead of time up to
# this many bytes per folded tensor.
MAX_FOLDED_BYTES = 64 << 20
# Dequantized weights are never folded: the step reading them keeps them compressed (ops/affine.py).
KEPT_COMPRESSED = frozenset({"torchao::dequantize_affine"})


def kept_compressed(node: Node) -> bool:
    from .affine import int8_weights_cast  # affine.py builds on this module

    op = aten_op(node.target)
    named = isinstance(op, torch._ops.OpOverload) and op.name() in KEPT_COMPRESSED
    return named or int8_weights_cast(node) is not None


class ConstantEvaluator:
    """Evaluates nodes that depend only on constants, with real tensors, once each."""

    def __init__(self, ep: ExportedProgram) -> None:
        self.ep = ep
        self.results: dict[Node, object] = {}
        # Placeholder name -> parameter, buffer or lifted constant (looked up once: the signature's
        # mappings are rebuilt on every access).
        signature, state, constants = ep.graph_signature, ep.state_dict, ep.constants
        self.placeholders: dict[str, torch.Tensor] = {
            **{name: state[target] for name, target in signature.inputs_to_parameters.items()},
            **{
                name: state[target] if target in state else constants[target]
                for name, target in signature.inputs_to_buffers.items()
            },
            **{name: constants[target] for name, target in signature.inputs_to_lifted_tensor_constants.items()},
        }

    def evaluate(self, node: Node) -> object | None:
        """The node's value, or None when it depends on a user input or cannot be folded."""
        # Iterative, inputs first: transformer graphs are deeper than Python's recursion limit.
        stack = [node]
        while stack:
            current = stack[-1]
            if current in self.results:
                stack.pop()
                continue
            pending = [arg for arg in current.all_input_nodes if arg not in self.results]
            if pending and current.op == "call_function":
                stack.extend(pending)
                continue
            self.results[current] = self._compute(current)
            stack.pop()
        return self.results[node]

    def _compute(self, node: Node) -> object | None:
        if node.op == "placeholder":
            return self.placeholders.get(node.name)
        if node.op != "call_function" or not callable(node.target):
            return None
        op = aten_op(node.target)
        if isinstance(op, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in op.tags:
            return None
        if kept_compressed(node):
            return None
        evaluated = {arg: self.results[arg] for arg in node.all_input_nodes}
        if any(value is None for value in evaluated.values()):
            return None
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda arg: evaluated[arg])
        with torch.no_grad():
            result = node.target(*args, **kwargs)
        tensors = result if isinstance(result, (tuple, list)) else [result]
        if any(isinstance(t, torch.Tensor) and t.nbytes > MAX_FOLDED_BYTES for t in tensors):
            return None
        return result


@functools.lru_cache(maxsize=4)
def constant_evaluator(ep: ExportedProgram) -> ConstantEvaluator:
    """One evaluator per program, shared by the partitioner's per-node checks and the lowering."""
    return ConstantEvaluator(ep)


class LoweringContext:
    """Builds a payload Graph node by node.

    A node first seen as an operand becomes a constant (parameters, buffers, lifted constants) or a
    graph input; the partitioner checks a single node this way, preprocess a whole program.
    """

    def __init__(self, ep: ExportedProgram, bound: Bound = "max", size_one: bool = True) -> None:
        self.ep = ep
        # Where dynamic sizes are taken (the runtime evaluates their expressions), and whether a size
        # ranging from 2 may be 1 (see concrete_dims).
        self.bound = bound
        self.size_one = size_one
        self.constants = constant_evaluator(ep)
        self.graph = Graph()
        self.node_values: dict[Node, int] = {}
        # Ops with several tensor results (split): node -> one value per result.
        self.multi_values: dict[Node, list[int]] = {}
        # The debug handle of the node being lowered, given to the steps it emits (Step.sources).
        self.sources: frozenset[int] = frozenset()

    def value(self, node: object, dtypes: set[torch.dtype] = SUPPORTED_DTYPES) -> int:
        """The node's value id; a constant or a graph input when first seen, of one of `dtypes`."""
        if not isinstance(node, Node):
            raise Unsupported(f"expected a tensor operand, got {node!r}")
        if node in self.node_values:
            value_id = self.node_values[node]
            if self.graph.values[value_id].dtype in (DType.S64, DType.BOOL) and fake_tensor(node).dtype not in dtypes:
                raise Unsupported(f"{node.name} has dtype {fake_tensor(node).dtype}")
            return value_id
        tensor = self.constants.evaluate(node)
        if isinstance(tensor, torch.Tensor):
            if tensor.dtype not in dtypes:
                raise Unsupported(f"constant {node.name} has dtype {tensor.dtype}")
            value_id = self.graph.add_constant(tensor, TORCH_TO_DTYPE[tensor.dtype])
        else:
            # An int8 input is only the result of a quantize the partition also takes (whose checks
            # ensure it), never a delegate input.
            accepted = dtypes | INT8_DTYPES if _is_quantize(node) else dtypes
            value_id = self.graph.add_value(node_dtype(node, accepted), self.dims_of(node, accepted))
            self.graph.inputs.append(value_id)
        self.node_values[node] = value_id
        return value_id

    def constant_node_data(self, node: object) -> torch.Tensor | None:
        """The node's value when it is computable ahead of time (any dtype)."""
        value = self.constants.evaluate(node) if isinstance(node, Node) else None
        return value if isinstance(value, torch.Tensor) else None

    def optional_value(self, node: object) -> int | None:
        return None if node is None else self.value(node)

    def constant(self, value_id: int) -> torch.Tensor | None:
        return self.graph.constant_data.get(value_id)

    def dims_of(self, node: Node, dtypes: set[torch.dtype] = SUPPORTED_DTYPES) -> tuple[int, ...]:
        """The node's result dims, each dynamic one a SymDim taken at `self.bound`."""
        tensor = fake_tensor(node)
        dims = concrete_dims(tensor.shape, self.ep.range_constraints, self.bound, self.size_one)
        if len(dims) > MAX_RANK:
            raise Unsupported(f"{node.name} has rank {len(dims)} > {MAX_RANK}")
        if 0 in dims:
            raise Unsupported(f"{node.name} is an empty tensor")
        if tensor.dtype not in dtypes:
            raise Unsupported(f"{node.name} has dtype {tensor.dtype}")
        return dims

    def size(self, value: object) -> int | None:
        """An int argument, or a size computed from dynamic sizes (a SymInt node) as a SymDim."""
        if value is None or isinstance(value, int):
            return value
        if isinstance(value, Node) and isinstance(value.meta.get("val"), torch.SymInt):
            (size,) = concrete_dims(
                torch.Size([value.meta["val"]]), self.ep.range_constraints, self.bound, self.size_one
            )
            return size
        raise Unsupported(f"expected a size, got {value!r}")

    def dims(self, value_id: int) -> tuple[int, ...]:
        return self.graph.values[value_id].dims

    def dtype(self, value_id: int) -> DType:
        return self.graph.values[value_id].dtype

    def new_value(self, dims: tuple[int, ...], dtype: DType) -> int:
        return self.graph.add_value(dtype, dims)

    def output(self, node: Node, dtypes: set[torch.dtype] = SUPPORTED_DTYPES) -> int:
        """A fresh value for the node's (first) result."""
        value_id = self.new_value(self.dims_of(node, dtypes), node_dtype(node, dtypes | INT8_DTYPES))
        self.node_values[node] = value_id
        return value_id

    def alias(self, node: Node, value_id: int) -> None:
        self.node_values[node] = value_id

    def fold(self, node: Node, tensor: torch.Tensor) -> None:
        """The node computes a constant ahead of time."""
        self.node_values[node] = self.graph.add_constant(tensor, TORCH_TO_DTYPE[tensor.dtype])

    def emit(
        self,
        kind: StepKind,
        inputs: list[int | None],
        outputs: list[int],
        ints: dict[str, list[int]] | None = None,
        floats: dict[str, list[float]] | None = None,
    ) -> Step:
        step = Step(
            kind,
            [NO_VALUE if v is None else v for v in inputs],
            outputs,
            dict(ints or {}),
            dict(floats or {}),
            self.sources,
        )
        return self.graph.add_step(step)
