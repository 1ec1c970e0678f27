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
