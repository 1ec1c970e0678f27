# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The conformance suite's plumbing (test/conformance): our flows in its registry, and the summary's counts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "conformance"))

import run_suite


def subtest(flow: str, result: str, detail: str = "", delegated: bool = True) -> dict[str, str]:
    return {
        "Test ID": f"test_x[{flow}]",
        "Test Case": "test_x",
        "Flow": flow,
        "Result": result,
        "Result Detail": detail,
        "Delegated": str(delegated),
        "Error": "boom" if result == "Fail" else "",
    }


def test_plugin_adds_our_flows_to_the_suites_registry() -> None:
    import executorch.backends.test.suite.flow as suite_flow
    import suite_plugin  # noqa: F401

    flows = suite_flow.all_flows()
    ours = {"onednn", "onednn_bf16", "onednn_static_int8_per_channel", "onednn_static_int8_per_tensor"}
    assert ours | {"onednn_dynamic_int8_per_channel", "portable"} <= set(flows)
    assert all(flows[name].backend == "onednn" for name in ours)
    assert flows["onednn_static_int8_per_tensor"].quantize and not flows["onednn_bf16"].quantize


def test_counts_separate_delegated_passes_and_classify_failures() -> None:
    report = {
        "tests": [
            {"metadata": {"subtests": [subtest("onednn", "Pass"), subtest("onednn", "Pass", delegated=False)]}},
            {"metadata": {"subtests": [subtest("onednn", "Fail", "Output Mismatch")]}},
            {"metadata": {"subtests": [subtest("onednn", "Fail", "Process Crash"), subtest("onednn", "Skip")]}},
            {"metadata": {"subtests": [subtest("xnnpack", "Fail", "Lowering Failed")]}},
        ]
    }
    counts = run_suite.count_by_flow(report, ["onednn", "xnnpack"])
    ours = counts["onednn"]
    assert ours.subtests == 5 and ours.failed == 2
    assert ours.by_category["delegated"] == 1 and ours.by_category["undelegated"] == 1
    assert ours.by_category["Output Mismatch"] == 1 and ours.by_category["Process Crash"] == 1
    assert counts["xnnpack"].by_category["Lowering Failed"] == 1


@pytest.mark.parametrize("value, expected", [("onednn=700", {"onednn": 700}), ("onednn_bf16", {"onednn_bf16": 0})])
def test_requirements_parse(value: str, expected: dict[str, int]) -> None:
    assert run_suite.parse_requirements([value]) == expected


def test_a_delegation_lost_since_the_recorded_run_is_reported_test_by_test() -> None:
    def test(nodeid: str, *subtests: dict[str, str]) -> dict[str, object]:
        return {"nodeid": nodeid, "metadata": {"subtests": [{**s, "Subtest": i} for i, s in enumerate(subtests)]}}

    report = {
        "tests": [
            test("a.py::t[onednn]", subtest("onednn", "Pass"), subtest("onednn", "Pass", delegated=False)),
            test("b.py::t[onednn]", subtest("onednn", "Fail", "Output Mismatch")),
        ]
    }
    assert run_suite.delegated_passes(report) == {"a.py::t[onednn]#0"}
    recorded = {"a.py::t[onednn]#0", "a.py::t[onednn]#1", "b.py::t[onednn]#0", "c.py::t[onednn]#0"}
    # c.py did not run (another shard): only what ran is held to the record.
    assert run_suite.lost_delegations(report, recorded) == ["a.py::t[onednn]#1", "b.py::t[onednn]#0"]


def test_shards_split_the_tests_between_them_by_id() -> None:
    import suite_plugin

    ids = [f"executorch/backends/test/suite/operators/test_{n}.py::test_{n}[onednn]" for n in range(300)]
    shards = [[i for i in ids if suite_plugin.in_shard(i, f"{k}/3")] for k in range(3)]
    assert sorted(i for shard in shards for i in shard) == sorted(ids)
    assert all(60 < len(shard) < 140 for shard in shards)
    assert run_suite.parse_shard("0/3") == "0/3"
    for bad in ("3/3", "1", "a/b"):
        with pytest.raises(Exception, match="expected K/N"):
            run_suite.parse_shard(bad)
