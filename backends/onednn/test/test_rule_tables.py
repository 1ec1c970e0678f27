# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The op rule tables (ops/rules.py, composite.py, indexing.py): each op has one rule, and a rule reads
its arguments with the types the op's schema gives them."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import pytest
import torch
from executorch.backends.onednn.ops import OP_RULES, RULE_TABLES, Unsupported, merge_rule_tables
from executorch.backends.onednn.ops.arguments import bool_arg, float_arg, int_arg, ints_arg, node_arg
from executorch.backends.onednn.ops.rules import OpRule, lower_nothing
from torch.fx import Graph, Node

aten = torch.ops.aten


@pytest.mark.parametrize(("first", "second"), list(combinations(RULE_TABLES, 2)))
def test_no_op_has_rules_in_two_tables(first: str, second: str) -> None:
    both = sorted(str(target) for target in set(RULE_TABLES[first]) & set(RULE_TABLES[second]))
    assert not both, f"ops with a rule in both {first} and {second}: {both}"


def test_op_rules_hold_every_table_row() -> None:
    assert len(OP_RULES) == sum(len(table) for table in RULE_TABLES.values())


def test_merging_refuses_an_op_in_two_tables() -> None:
    rule = OpRule(lower_nothing)
    with pytest.raises(ValueError, match=r"aten\.relu\.default has a rule in both a\.py and b\.py"):
        merge_rule_tables({"a.py": {aten.relu.default: rule}, "b.py": {aten.relu.default: rule}})


def test_upsampling_lowers_with_the_composite_rule() -> None:
    """The composite rows (gathers, interpolation matmuls) handle the cases oneDNN's resampling does not,
    and hand the others to it."""
    assert OP_RULES[aten.upsample_bilinear2d.vec].lower.__name__ == "lower_upsample_bilinear"
    assert OP_RULES[aten.upsample_nearest2d.vec].lower.__name__ == "lower_upsample_nearest"


def call(*args: object, **kwargs: object) -> Node:
    """A call node with these arguments (a placeholder where an argument is "tensor")."""
    graph = Graph()
    x = graph.placeholder("x")
    args = tuple(x if a == "tensor" else a for a in args)
    return graph.call_function(aten.clamp.default, args, kwargs)


def test_typed_arguments_read_position_then_keyword_then_default() -> None:
    node = call("tensor", 2, 0.5, keepdim=True)
    assert int_arg(node, 1, "dim") == 2
    assert float_arg(node, 2, "alpha") == 0.5
    assert bool_arg(node, 3, "keepdim", False) is True
    assert float_arg(node, 4, "beta", 1) == 1.0
    assert isinstance(node_arg(node, 0, "self"), Node)


@pytest.mark.parametrize(
    ("read", "value", "message"),
    [
        (int_arg, 1.5, "dim=1.5, expected an int"),
        (int_arg, True, "dim=True, expected an int"),
        (float_arg, "tensor", "dim=x, expected a number"),
        (bool_arg, 1, "dim=1, expected a bool"),
        (ints_arg, [1, 2.0], r"dim=\[1, 2.0\], expected a list of ints"),
        (node_arg, 3, "dim=3, expected a tensor"),
    ],
)
def test_an_argument_of_another_type_refuses_the_node(
    read: Callable[[Node, int, str], object], value: object, message: str
) -> None:
    node = call("tensor", value)
    with pytest.raises(Unsupported, match=f"{node.name}: {message}"):
        read(node, 1, "dim")
