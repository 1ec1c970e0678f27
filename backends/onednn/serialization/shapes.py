# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Dynamic dims (torch.export.Dim): `SymDim` in a Graph's values, postfix ShapeOp code in the payload.

Lowering works on plain ints; a dynamic dim is a `SymDim`: an int holding the dim at the point the
program is lowered at (every size at its maximum, unless told otherwise) that carries its sympy
expression through the arithmetic rules do on dims and on the attributes that follow them (slice
offsets). The payload stores the expressions and the runtime evaluates them once the caller's inputs
fix the sizes. Whatever a rule decides in a way that does not carry (a comparison of sizes) is caught
by lowering the program a second time at the minimum sizes and comparing (see onednn_preprocess).
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Sequence

import sympy
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

from .schema import MAX_SHAPE_CODE, MAX_SOLVED_RANGE, ShapeOp

Bounds = dict[sympy.Symbol, tuple[int, int]]


class SymDim(int):
    """A dim's value at the lowering point, with the expression it is of the dynamic sizes."""

    expr: sympy.Expr
    bounds: Bounds

    def __new__(cls, value: int, expr: sympy.Expr, bounds: Bounds) -> SymDim:
        dim = super().__new__(cls, value)
        dim.expr = expr
        dim.bounds = bounds
        return dim

    def __repr__(self) -> str:
        return f"{int(self)}<{self.expr}>"

    def _combine(self, other: object, op: Callable[[int, int], int], make: Callable, reflected: bool) -> object:
        if not isinstance(other, int) or isinstance(other, bool):
            return NotImplemented
        left, right = (other, self) if reflected else (self, other)
        return dim_of(op(int(left), int(right)), make(_expr(left), _expr(right)), {**self.bounds, **_bounds(other)})

    def __add__(self, other: object) -> object:
        return self._combine(other, int.__add__, sympy.Add, False)

    def __radd__(self, other: object) -> object:
        return self._combine(other, int.__add__, sympy.Add, True)

    def __sub__(self, other: object) -> object:
        return self._combine(other, int.__sub__, lambda a, b: a - b, False)

    def __rsub__(self, other: object) -> object:
        return self._combine(other, int.__sub__, lambda a, b: a - b, True)

    def __mul__(self, other: object) -> object:
        return self._combine(other, int.__mul__, sympy.Mul, False)

    def __rmul__(self, other: object) -> object:
        return self._combine(other, int.__mul__, sympy.Mul, True)

    def __floordiv__(self, other: object) -> object:
        return self._combine(other, int.__floordiv__, FloorDiv, False)

    def __rfloordiv__(self, other: object) -> object:
        return self._combine(other, int.__floordiv__, FloorDiv, True)

    def __mod__(self, other: object) -> object:
        return self._combine(other, int.__mod__, sympy.Mod, False)

    def __rmod__(self, other: object) -> object:
        return self._combine(other, int.__mod__, sympy.Mod, True)

    def __neg__(self) -> object:
        return dim_of(-int(self), -self.expr, self.bounds)

    # int's hash, so that a SymDim and the int it equals stay interchangeable as keys.
    __hash__ = int.__hash__


def _expr(value: int) -> sympy.Expr:
    return value.expr if isinstance(value, SymDim) else sympy.Integer(value)


def _bounds(value: int) -> Bounds:
    return value.bounds if isinstance(value, SymDim) else {}


def dim_of(value: int, expr: sympy.Expr, bounds: Bounds) -> int:
    """A SymDim, or a plain int when the expression is a constant within the sizes' ranges (a view's
    inferred dim, numel // (others), often is one that sympy cannot see)."""
    if expr.is_Integer:
        return int(expr)
    relevant = {symbol: bounds[symbol] for symbol in expr.free_symbols if symbol in bounds}
    if expr.has(FloorDiv, Mod, PythonMod, sympy.Mod, sympy.Min, sympy.Max) and _is_constant(
        expr, tuple(sorted(relevant.items(), key=str))
    ):
        return value
    return SymDim(value, expr, relevant)


@functools.lru_cache(maxsize=4096)
def _is_constant(expr: sympy.Expr, bounds: tuple[tuple[sympy.Symbol, tuple[int, int]], ...]) -> bool:
    if len(bounds) != len(expr.free_symbols):
        return False
    values = _at_every_point([expr], dict(bounds))
    return values is not None and len({point[0] for point in values}) == 1


# Up to this many points (sizes within their ranges), dims are compared at every one of them: exact,
# and far cheaper than sympy.simplify (which took minutes on a Swin Transformer's slices).
MAX_POINTS_COMPARED = 4096


def _at_every_point(exprs: list[sympy.Expr], bounds: Bounds) -> list[tuple[int, ...]] | None:
    """The expressions' values at every point of the sizes' ranges; None when there are too many
    points or one cannot be evaluated."""
    symbols = sorted(bounds, key=str)
    ranges = [range(bounds[symbol][0], bounds[symbol][1] + 1) for symbol in symbols]
    if math.prod(len(r) for r in ranges) > MAX_POINTS_COMPARED:
        return None
    try:
        codes = [_postfix(expr, symbols) for expr in exprs]
        return [tuple(evaluate(code, point) for code in codes) for point in itertools.product(*ranges)]
    except (ShapeError, ValueError, ZeroDivisionError):  # ValueError: a symbol without a range
        return None


def _pairs(a: int, b: int) -> list[tuple[int, ...]] | None:
    if not isinstance(a, SymDim) and not isinstance(b, SymDim):
        return None
    return _at_every_point([_expr(a), _expr(b)], {**_bounds(a), **_bounds(b)})


def is_read_from_data(dim: SymDim) -> bool:
    """Whether the size depends on a value read from a tensor's data (an unbacked symbol, `u0`, from
    `.item()`), which no input dim can give."""
    return any(free_unbacked_symbols(dim.expr))


def same(a: int, b: int) -> bool:
    """Equal at every size (a plain == compares the values at the maximum)."""
    if not isinstance(a, SymDim) and not isinstance(b, SymDim):
        return a == b
    if _expr(a) == _expr(b):
        return True
    pairs = _pairs(a, b)
    if pairs is not None:
        return all(x == y for x, y in pairs)
    return bool(sympy.simplify(_expr(a) - _expr(b)) == 0)


def left_pad(dims: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """`dims` with 1s prepended up to `rank` (numpy-style broadcasting alignment)."""
    return (1,) * (rank - len(dims)) + tuple(dims)


def same_dims(a: Sequence[int], b: Sequence[int]) -> bool:
    """Equal dims at every size: passes decide fusions with it, so that a program lowered at its
    smallest sizes (where a broadcast may vanish) gets the same steps as at its largest."""
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def smallest(a: int, b: int) -> int:
    """min(a, b) that stays right at every size (a plain min compares the values at the maximum)."""
    return _extreme(a, b, operator.le, min, sympy.Min)


def largest(a: int, b: int) -> int:
    """max(a, b) that stays right at every size."""
    return _extreme(a, b, operator.ge, max, sympy.Max)


def _extreme(a: int, b: int, before: Callable[[int, int], bool], pick: Callable, symbolic: Callable) -> int:
    pairs = _pairs(a, b)
    if pairs is not None and all(before(x, y) for x, y in pairs):
        return a  # a slice clamped to its dim keeps a short expression
    if pairs is not None and all(before(y, x) for x, y in pairs):
        return b
    return dim_of(pick(int(a), int(b)), symbolic(_expr(a), _expr(b)), {**_bounds(a), **_bounds(b)})


def gives_size_one_to_one(expr: sympy.Expr, symbol: sympy.Symbol, bounds: tuple[int, int]) -> bool:
    """Whether an input dim of this expression gives the runtime `symbol` (runtime/DynamicShapes.h)."""
    if expr == symbol:
        return True
    if expr.free_symbols != {symbol} or bounds[1] - bounds[0] >= MAX_SOLVED_RANGE:
        return False
    values = _at_every_point([expr], {symbol: bounds})
    return values is not None and all(a < b for (a,), (b,) in itertools.pairwise(values))


def at_point(value: int, point: dict[sympy.Symbol, int]) -> int:
    """The value at other sizes than those it was taken at."""
    return int(value.expr.subs(point)) if isinstance(value, SymDim) else int(value)


class ShapeError(ValueError):
    """A dynamic dim whose expression the runtime cannot evaluate."""


def encode(expr: sympy.Expr, symbols: list[sympy.Symbol]) -> list[int]:
    """`expr` as ShapeOp code; `symbols` gives each symbol's index."""
    code = _postfix(expr, symbols)
    if len(code) > MAX_SHAPE_CODE:
        raise ShapeError(f"dynamic dim {expr} needs {len(code)} code entries (at most {MAX_SHAPE_CODE})")
    return code


def _postfix(expr: sympy.Expr, symbols: list[sympy.Symbol]) -> list[int]:
    code: list[int] = []

    def emit(node: sympy.Expr) -> None:
        if node.is_Integer:
            code.extend((ShapeOp.CONST, int(node)))
        elif node.is_Symbol:
            code.extend((ShapeOp.SYMBOL, symbols.index(node)))
        elif isinstance(node, (sympy.Add, sympy.Mul, sympy.Max, sympy.Min)):
            op = {sympy.Add: ShapeOp.ADD, sympy.Mul: ShapeOp.MUL, sympy.Max: ShapeOp.MAX, sympy.Min: ShapeOp.MIN}
            emit(node.args[0])
            for arg in node.args[1:]:
                emit(arg)
                code.append(op[type(node)])
        elif isinstance(node, (FloorDiv, Mod, PythonMod, sympy.Mod)) and len(node.args) == 2:
            emit(node.args[0])
            emit(node.args[1])
            code.append(ShapeOp.FLOORDIV if isinstance(node, FloorDiv) else ShapeOp.MOD)
        elif isinstance(node, sympy.Pow) and node.exp.is_Integer and 1 <= int(node.exp) <= 4:
            emit(node.base)
            for _ in range(int(node.exp) - 1):
                emit(node.base)
                code.append(ShapeOp.MUL)
        else:
            raise ShapeError(f"dynamic dim {expr}: {type(node).__name__} has no payload encoding")

    emit(expr)
    return [int(entry) for entry in code]


_INT_OPS: dict[int, Callable[[int, int], int]] = {
    ShapeOp.ADD: int.__add__,
    ShapeOp.MUL: int.__mul__,
    ShapeOp.FLOORDIV: int.__floordiv__,  # both round toward negative infinity, as the runtime does
    ShapeOp.MOD: int.__mod__,
    ShapeOp.MAX: max,
    ShapeOp.MIN: min,
}


def evaluate(code: list[int], values: Sequence[int]) -> int:
    """The value of `code` with symbol i = values[i], computed as the runtime does."""
    stack: list[int] = []
    position = 0
    while position < len(code):
        op = code[position]
        if op in (ShapeOp.CONST, ShapeOp.SYMBOL):
            operand = code[position + 1]
            stack.append(operand if op == ShapeOp.CONST else values[operand])
            position += 2
        else:
            right = stack.pop()
            stack.append(_INT_OPS[op](stack.pop(), right))
            position += 1
    (value,) = stack
    return value


def decode(code: list[int], symbols: list[sympy.Symbol]) -> sympy.Expr:
    """The expression of `code` (for tests and tooling)."""
    binary = {
        ShapeOp.ADD: lambda a, b: a + b,
        ShapeOp.MUL: lambda a, b: a * b,
        ShapeOp.FLOORDIV: FloorDiv,
        ShapeOp.MOD: sympy.Mod,
        ShapeOp.MAX: sympy.Max,
        ShapeOp.MIN: sympy.Min,
    }
    stack: list[sympy.Expr] = []
    entries = iter(code)
    for entry in entries:
        op = ShapeOp(entry)
        if op in (ShapeOp.CONST, ShapeOp.SYMBOL):
            operand = next(entries)
            stack.append(sympy.Integer(operand) if op == ShapeOp.CONST else symbols[operand])
        else:
            right = stack.pop()
            stack.append(binary[op](stack.pop(), right))
    if len(stack) != 1:
        raise ShapeError(f"malformed dim code {code}")
    return stack[0]
