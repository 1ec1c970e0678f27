"""Dynamic dims (torch.export.Dim): `SymDim` in a Graph's values, postfix ShapeOp code in the payload.

Lowering works on plain ints; a dynamic dim is a `SymDim`: an int holding the dim at the point the
program is lowered at (every size at its maximum, unless told otherwise) that carries its sympy
expression through the arithmetic rules do on dims and on the attributes that follow them (slice
offsets). The payload stores the expressions and the runtime evaluates them once the caller's inputs
fix the sizes. Whatever a rule decides in a way that does not carry (a comparison of sizes) is caught
by lowering the program a second time at the minimum sizes and comparing (see onednn_preprocess).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

from .schema import MAX_SHAPE_CODE, ShapeOp

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

    def __neg__(self) -> object:
        return dim_of(-int(self), -self.expr, self.bounds)

    # int's hash, so that a SymDim and the int it equals stay interchangeable as keys.
    __hash__ = int.__hash__


def _expr(value: int) -> sympy.Expr:
    return value.expr if isinstance(value, SymDim) else sympy.Integer(value)


def _bounds(value: int) -> Bounds:
    return value.bounds if isinstance(value, SymDim) else {}


def dim_of(value: int, expr: sympy.Expr, bounds: Bounds) -> int:
    """A SymDim, or a plain int when the expression is a constant."""
    if expr.is_Integer:
        return int(expr)
    return SymDim(value, expr, {symbol: bounds[symbol] for symbol in expr.free_symbols if symbol in bounds})


def same(a: int, b: int) -> bool:
    """Equal at every size (a plain == compares the values at the maximum)."""
    return bool(sympy.simplify(_expr(a) - _expr(b)) == 0) if isinstance(a, SymDim) or isinstance(b, SymDim) else a == b


def smallest(a: int, b: int) -> int:
    """min(a, b) that stays right at every size (a plain min compares the values at the maximum)."""
    return dim_of(min(int(a), int(b)), sympy.Min(_expr(a), _expr(b)), {**_bounds(a), **_bounds(b)})


def largest(a: int, b: int) -> int:
    return dim_of(max(int(a), int(b)), sympy.Max(_expr(a), _expr(b)), {**_bounds(a), **_bounds(b)})


def at_point(value: int, point: dict[sympy.Symbol, int]) -> int:
    """The value at other sizes than those it was taken at."""
    return int(value.expr.subs(point)) if isinstance(value, SymDim) else int(value)


class ShapeError(ValueError):
    """A dynamic dim whose expression the runtime cannot evaluate."""


def encode(expr: sympy.Expr, symbols: list[sympy.Symbol]) -> list[int]:
    """`expr` as ShapeOp code; `symbols` gives each symbol's index."""
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
    if len(code) > MAX_SHAPE_CODE:
        raise ShapeError(f"dynamic dim {expr} needs {len(code)} code entries (at most {MAX_SHAPE_CODE})")
    return [int(entry) for entry in code]


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
