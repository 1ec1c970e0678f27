# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A node's arguments by position or keyword, checked for the type the op's schema gives them.

An argument of another type than the rule expects refuses the node (`Unsupported`, with the argument's
name and value) rather than failing deep inside the lowering.
"""

from __future__ import annotations

from torch.fx import Node

from .context import Unsupported


def arg(node: Node, index: int, name: str, default: object = None) -> object:
    """Argument `index` of the call, else keyword `name`, else `default`."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _refuse(node: Node, name: str, value: object, expected: str) -> Unsupported:
    return Unsupported(f"{node.name}: {name}={value!r}, expected {expected}")


def int_arg(node: Node, index: int, name: str, default: int | None = None) -> int:
    value = arg(node, index, name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(node, name, value, "an int")
    return value


def float_arg(node: Node, index: int, name: str, default: float | None = None) -> float:
    """A float argument; an int is taken as its float, as PyTorch takes it."""
    value = arg(node, index, name, default)
    if not isinstance(value, (int, float)):
        raise _refuse(node, name, value, "a number")
    return float(value)


def bool_arg(node: Node, index: int, name: str, default: bool | None = None) -> bool:
    value = arg(node, index, name, default)
    if not isinstance(value, bool):
        raise _refuse(node, name, value, "a bool")
    return value


def str_arg(node: Node, index: int, name: str, default: str | None = None) -> str:
    value = arg(node, index, name, default)
    if not isinstance(value, str):
        raise _refuse(node, name, value, "a string")
    return value


def list_arg(node: Node, index: int, name: str) -> list[object]:
    """A list argument whose items the caller checks (tensors, or sizes that may be SymInt nodes)."""
    value = arg(node, index, name)
    if not isinstance(value, (list, tuple)):
        raise _refuse(node, name, value, "a list")
    return list(value)


def ints_arg(node: Node, index: int, name: str) -> list[int]:
    items = list_arg(node, index, name)
    ints = [item for item in items if isinstance(item, int) and not isinstance(item, bool)]
    if len(ints) != len(items):
        raise _refuse(node, name, items, "a list of ints")
    return ints


def floats_arg(node: Node, index: int, name: str) -> list[float]:
    items = list_arg(node, index, name)
    floats = [float(item) for item in items if isinstance(item, (int, float))]
    if len(floats) != len(items):
        raise _refuse(node, name, items, "a list of numbers")
    return floats


def node_arg(node: Node, index: int, name: str) -> Node:
    """A tensor argument: the node computing it."""
    value = arg(node, index, name)
    if not isinstance(value, Node):
        raise _refuse(node, name, value, "a tensor")
    return value
