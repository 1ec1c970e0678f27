# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""runtime/Schema.h (and the C++ tables keyed by its codes) against serialization/schema.py, the one definition
of the payload's codes and limits: a code or constant missing on either side, or with another value, fails here
by name before a payload written by one side is misread by the other."""

from __future__ import annotations

import ast
import re
from enum import IntEnum
from pathlib import Path

import pytest
from executorch.backends.onednn.serialization import schema
from executorch.backends.onednn.serialization.schema import StepKind
from executorch.backends.onednn.serialization.step_kinds import STEP_KINDS

PACKAGE = Path(__file__).resolve().parents[1]
SCHEMA_H = PACKAGE / "runtime" / "Schema.h"
ALGORITHMS_H = PACKAGE / "runtime" / "Algorithms.h"
FORMAT_MD = PACKAGE / "serialization" / "FORMAT.md"

ENUM = re.compile(r"enum class (\w+)\s*:\s*\w+\s*\{(.*?)\};", re.S)
CONSTANT = re.compile(r"inline constexpr (?:u?int\d+_t|size_t|char) (k\w+)(?:\[\d*\])? = (.*?);", re.S)


def _source(path: Path) -> str:
    """The file without its comments."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(), flags=re.S)


def _cpp_enums() -> dict[str, dict[str, int]]:
    enums: dict[str, dict[str, int]] = {}
    for name, body in ENUM.findall(_source(SCHEMA_H)):
        members: dict[str, int] = {}
        for entry in filter(None, (part.strip() for part in body.split(","))):
            assert "=" in entry, f"Schema.h {name}::{entry} has no explicit code: give every enumerator its value"
            member, value = (part.strip() for part in entry.split("=", 1))
            members[member] = _evaluate(value)
        enums[name] = members
    return enums


def _evaluate(expression: str) -> int:
    """A C++ integer constant expression of literals, shifts and arithmetic (`int64_t{1} << 16`, `0xFFu`)."""
    text = re.sub(r"\b\w+_t\{([^}]*)\}", r"(\1)", expression)
    text = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", text)

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        operators = {ast.LShift: int.__lshift__, ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__}
        if isinstance(node, ast.BinOp) and type(node.op) in operators:
            return operators[type(node.op)](value(node.left), value(node.right))
        raise AssertionError(f"Schema.h: cannot read the constant expression {expression!r}")

    return value(ast.parse(text, mode="eval").body)


def _cpp_constants() -> dict[str, int | bytes]:
    constants: dict[str, int | bytes] = {}
    for name, expression in CONSTANT.findall(_source(SCHEMA_H)):
        characters = re.fullmatch(r"\{\s*('.'(?:\s*,\s*'.')*)\s*\}", expression.strip())
        if characters:
            constants[name] = "".join(re.findall(r"'(.)'", characters.group(1))).encode()
        else:
            constants[name] = _evaluate(expression)
    return constants


def _python_enums() -> dict[str, type[IntEnum]]:
    return {
        name: obj
        for name, obj in vars(schema).items()
        if isinstance(obj, type) and issubclass(obj, IntEnum) and obj.__module__ == schema.__name__
    }


def _python_constants() -> dict[str, int | bytes]:
    return {
        name: obj
        for name, obj in vars(schema).items()
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and type(obj) in (int, bytes)
    }


def _spelling(name: str) -> str:
    """A name as both sides spell it, up to case and underscores (GELU_ERF, GeluErf; FLOORDIV, FloorDiv)."""
    return name.replace("_", "").upper()


def _python_name(cpp_constant: str) -> str:
    """kMaxShapeCode -> MAX_SHAPE_CODE."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cpp_constant[1:]).upper()


def _count_name(enum: str) -> str:
    return f"kNum{enum}s"


def test_every_enumeration_is_on_both_sides() -> None:
    cpp, python = set(_cpp_enums()), set(_python_enums())
    assert cpp - python == set(), f"enumerations in Schema.h that schema.py lacks: {sorted(cpp - python)}"
    assert python - cpp == set(), f"enumerations in schema.py that Schema.h lacks: {sorted(python - cpp)}"


@pytest.mark.parametrize("enum", sorted(_python_enums()))
def test_enumeration_has_the_same_codes_on_both_sides(enum: str) -> None:
    cpp = _cpp_enums().get(enum)
    assert cpp is not None, f"schema.py's {enum} has no enum class {enum} in Schema.h"
    python = {member.name: int(member) for member in _python_enums()[enum]}
    cpp_by_spelling = {_spelling(name): (name, code) for name, code in cpp.items()}
    python_by_spelling = {_spelling(name): (name, code) for name, code in python.items()}
    assert len(cpp_by_spelling) == len(cpp) and len(python_by_spelling) == len(python), (
        f"{enum}: names that differ only in case or underscores"
    )
    problems = [
        f"schema.py {enum}.{name} = {code} has no enumerator in Schema.h"
        for spelling, (name, code) in python_by_spelling.items()
        if spelling not in cpp_by_spelling
    ]
    problems += [
        f"Schema.h {enum}::{name} = {code} has no member in schema.py"
        for spelling, (name, code) in cpp_by_spelling.items()
        if spelling not in python_by_spelling
    ]
    problems += [
        f"{enum}.{name} is {code} in schema.py but {enum}::{cpp_by_spelling[spelling][0]} is "
        f"{cpp_by_spelling[spelling][1]} in Schema.h"
        for spelling, (name, code) in python_by_spelling.items()
        if spelling in cpp_by_spelling and cpp_by_spelling[spelling][1] != code
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("enum", sorted(_python_enums()))
def test_enumeration_codes_are_dense_and_counted(enum: str) -> None:
    """The runtime checks a code against kNum...s and keys its tables by it (CodeTable.h): that is exact only when
    the codes run without gaps from 0 (StepKind: from 1) to one below the count."""
    codes = sorted(int(member) for member in _python_enums()[enum])
    first = 1 if enum == "StepKind" else 0
    assert codes == list(range(first, codes[-1] + 1)), f"{enum} codes {codes} do not run from {first} without gaps"
    counts = _cpp_constants()
    assert _count_name(enum) in counts, f"Schema.h has no {_count_name(enum)} (one past the largest {enum} code)"
    assert counts[_count_name(enum)] == codes[-1] + 1, (
        f"Schema.h {_count_name(enum)} is {counts[_count_name(enum)]}, but {enum}'s largest code is {codes[-1]}"
    )


def test_constants_have_the_same_values_on_both_sides() -> None:
    counts = {_count_name(enum) for enum in _cpp_enums()}
    cpp = {_python_name(name): (name, value) for name, value in _cpp_constants().items() if name not in counts}
    python = _python_constants()
    problems = [
        f"Schema.h {name} = {value!r} has no {key} in schema.py"
        for key, (name, value) in cpp.items()
        if key not in python
    ]
    problems += [
        f"schema.py {key} = {value!r} has no counterpart in Schema.h" for key, value in python.items() if key not in cpp
    ]
    problems += [
        f"{key} is {python[key]!r} in schema.py but Schema.h {name} is {value!r}"
        for key, (name, value) in cpp.items()
        if key in python and python[key] != value
    ]
    assert not problems, "\n".join(problems)


def test_runtime_computes_on_the_host_exactly_the_host_eltwise_algs() -> None:
    rows = dict(re.findall(r"\{EltwiseAlg::(\w+),\s*(onednn_eltwise|host_eltwise)\(", _source(ALGORITHMS_H)))
    on_host = {_spelling(name) for name, how in rows.items() if how == "host_eltwise"}
    expected = {_spelling(alg.name) for alg in schema.HOST_ELTWISE_ALGS}
    assert on_host == expected, (
        f"HOST_ELTWISE_ALGS {sorted(expected)} but Algorithms.h runs {sorted(on_host)} on the host"
    )
    assert {_spelling(name) for name in rows} == {_spelling(alg.name) for alg in schema.EltwiseAlg}, (
        "Algorithms.h kEltwiseImplementations must have one row per EltwiseAlg"
    )


def test_format_md_names_codes_without_repeating_their_numbers() -> None:
    """FORMAT.md explains the format and names the codes; their numbers live in schema.py only."""
    text = FORMAT_MD.read_text()
    title = re.search(r"^# OneDnnBackend payload, version (\d+)$", text, re.M)
    assert title is not None and int(title.group(1)) == schema.VERSION, (
        f"FORMAT.md's title is not version {schema.VERSION}"
    )
    numbered = re.findall(r"\b[A-Z][A-Z0-9_]*=\d+", text)
    assert not numbered, f"FORMAT.md repeats codes of schema.py: {numbered}"
    assert "schema.py" in text


def test_step_signatures_agree_with_the_step_kind_table() -> None:
    """Schema.h's signature of each step kind (name, post-ops, host index step) against step_kinds.py's row."""
    rows = re.findall(
        r'\{StepKind::(\w+), \{"(\w+)", (\d+), (\d+), (true|false), (true|false), (\d+), (true|false)\}\}',
        _source(SCHEMA_H),
    )
    by_name = {name: (fixed, post_ops == "true", host == "true") for _, name, _, fixed, _, post_ops, _, host in rows}
    assert set(by_name) == {kind.name for kind in StepKind}, f"Schema.h has signatures for {sorted(by_name)}"
    for kind in StepKind:
        fixed, post_ops, host_index = by_name[kind.name]
        row = STEP_KINDS[kind]
        assert host_index == row.host_index, (
            f"{kind.name}: host_index {host_index} in Schema.h, {row.host_index} in Python"
        )
        assert post_ops == (row.post_op_fixed_inputs is not None), f"{kind.name}: post-ops differ"
        if post_ops:
            assert int(fixed) == row.post_op_fixed_inputs, f"{kind.name}: {fixed} fixed inputs in Schema.h"
