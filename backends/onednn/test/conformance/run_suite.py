# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Run ExecuTorch's backend conformance suite for our flows (and others, for comparison) and summarize it.

    python backends/onednn/test/conformance/run_suite.py --flows onednn,onednn_bf16,xnnpack \
        --out results/conformance --write-md CONFORMANCE.md

runs the suite from the installed wheel with our flows registered (`suite_plugin.py`), writes pytest's JSON
report, the suite's own markdown summary per flow (`generate_markdown_summary_json.py`), and a table of
per-flow counts that separates passes with our delegate in the program from passes without it.
`--require FLOW=N` fails the run unless FLOW had no failed subtest and at least N delegated passes.

`--shard K/N` runs only the tests whose id hashes to K of N (CI runs a third: the whole suite takes 13
minutes on 2 cores). `--record-delegated FILE` writes the ids of the delegated passes; `--expect-delegated
FILE` fails the run when a subtest listed there ran and was not a delegated pass, so that a shard guards
delegation test by test.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = ("operators", "models")
# Our categories, in table order: (key, column title).
CATEGORIES = (
    ("delegated", "passed, delegated"),
    ("undelegated", "passed, not delegated"),
    ("skipped", "skipped"),
    ("Quantization Failed", "quantization failures"),
    ("Lowering Failed", "lowering failures"),
    ("PTE Load Failed", "load failures"),
    ("PTE Run Failed", "run failures"),
    ("Output Mismatch", "output mismatches"),
    ("Process Crash", "crashes"),
    ("other failure", "other failures"),
)


@dataclass
class FlowCounts:
    subtests: int = 0
    by_category: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, str]] = field(default_factory=list)

    def add(self, subtest: dict[str, str]) -> None:
        self.subtests += 1
        result, detail = subtest.get("Result"), subtest.get("Result Detail") or ""
        if result == "Pass":
            self.by_category["delegated" if subtest.get("Delegated") == "True" else "undelegated"] += 1
        elif result == "Skip":
            self.by_category["skipped"] += 1
        else:
            known = {key for key, _ in CATEGORIES}
            self.by_category[next((k for k in known if detail.startswith(k)), "other failure")] += 1
            self.failures.append(subtest)

    @property
    def failed(self) -> int:
        return len(self.failures)


def site_packages() -> Path:
    import executorch.exir

    return Path(executorch.exir.__file__).resolve().parents[2]


def run_pytest(suite: str, flows: list[str], report: Path, workers: int, keyword: str | None, shard: str | None) -> int:
    env = dict(os.environ)
    # HERE holds the plugin and our flows; its parent the tester they use.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), str(HERE.parent), env.get("PYTHONPATH", "")) if p)
    if shard:
        env["ONEDNN_SUITE_SHARD"] = shard
    root = site_packages()
    command = [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(root), "-p", "suite_plugin"]
    # A module whose imports fail (the model suite's torchaudio tests without torchaudio) is reported,
    # not allowed to stop the others.
    command += ["-p", "no:cacheprovider", "-q", "--continue-on-collection-errors"]
    command += ["-m", " or ".join(f"flow_{f}" for f in flows)]
    command += [f"executorch/backends/test/suite/{suite}", "--json-report", f"--json-report-file={report}"]
    if workers > 1:
        command += ["-n", str(workers)]
    if keyword:
        command += ["-k", keyword]
    print("+", " ".join(command), flush=True)
    return subprocess.call(command, cwd=root, env=env)


def subtests(report: dict[str, object]) -> Iterator[tuple[str, dict[str, str]]]:
    """Every subtest of the report with its id, "<test node id>#<subtest index>"."""
    for test in report["tests"]:  # type: ignore[attr-defined]
        for subtest in test.get("metadata", {}).get("subtests", []):
            yield f"{test['nodeid']}#{subtest['Subtest']}", subtest


def delegated_passes(report: dict[str, object]) -> set[str]:
    return {
        key
        for key, subtest in subtests(report)
        if subtest.get("Result") == "Pass" and subtest.get("Delegated") == "True"
    }


def lost_delegations(report: dict[str, object], expected: set[str]) -> list[str]:
    """The subtests of `expected` that ran and were not delegated passes."""
    ran = {key for key, _ in subtests(report)}
    return sorted((ran & expected) - delegated_passes(report))


def parse_shard(value: str) -> str:
    index, _, count = value.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise argparse.ArgumentTypeError(f"--shard {value}: expected K/N with 0 <= K < N")
    return value


def count_by_flow(report: dict[str, object], flows: list[str]) -> dict[str, FlowCounts]:
    counts = {flow: FlowCounts() for flow in flows}
    for test in report["tests"]:  # type: ignore[attr-defined]
        for subtest in test.get("metadata", {}).get("subtests", []):
            flow = subtest.get("Flow")
            if flow in counts:
                counts[flow].add(subtest)
    return counts


def suite_markdown(report: dict[str, object], flow: str) -> str:
    """The suite's own summary (generate_markdown_summary_json.py) of one flow's subtests."""
    from executorch.backends.test.suite.generate_markdown_summary_json import generate_markdown

    tests = []
    for test in report["tests"]:  # type: ignore[attr-defined]
        subtests = [s for s in test.get("metadata", {}).get("subtests", []) if s.get("Flow") == flow]
        if subtests:
            tests.append({**test, "metadata": {"subtests": subtests}})
    filtered = Path(os.environ.get("TMPDIR", "/tmp")) / f"conformance_{flow}_{os.getpid()}.json"
    filtered.write_text(json.dumps({"tests": tests}))
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text):
            generate_markdown(str(filtered))
    finally:
        filtered.unlink()
    # Demote the suite's headings under ours.
    return "\n".join("##" + line if line.startswith("#") else line for line in text.getvalue().splitlines())


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def summary_markdown(suite: str, counts: dict[str, FlowCounts], report: dict[str, object], command: str) -> str:
    lines = [
        f"# Backend conformance suite: {suite}",
        "",
        f"{datetime.date.today().isoformat()}, {cpu_name()}, {os.cpu_count()} cores; `{command}`.",
        "Counts are the suite's subtests. *passed, delegated*: the program held a delegate and its outputs matched",
        "eager PyTorch (atol 1e-1, rtol 4e-2); *passed, not delegated*: nothing was delegated (the suite counts",
        "that as a pass without running the program).",
        "",
        "| flow | subtests | " + " | ".join(title for _, title in CATEGORIES) + " |",
        "|---|---:|" + "---:|" * len(CATEGORIES),
    ]
    for flow, c in counts.items():
        cells = [str(c.by_category[key]) for key, _ in CATEGORIES]
        lines.append(f"| {flow} | {c.subtests} | " + " | ".join(cells) + " |")
    for flow, c in counts.items():
        ran = c.subtests - c.by_category["skipped"]  # the suite's summary divides by this
        summary = suite_markdown(report, flow) if ran else "No subtest ran."
        lines += ["", f"## Flow `{flow}`: the suite's summary", "", summary]
    return "\n".join(lines) + "\n"


def parse_requirements(values: list[str]) -> dict[str, int]:
    required = {}
    for value in values:
        flow, _, minimum = value.partition("=")
        required[flow] = int(minimum or 0)
    return required


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=SUITES, default="operators")
    parser.add_argument("--flows", default="onednn,onednn_bf16,xnnpack", help="comma-separated flow names")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="pytest-xdist workers")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression selecting tests")
    parser.add_argument("--out", type=Path, default=Path("results/conformance"), help="report folder")
    parser.add_argument("--write-md", type=Path, help="also write the summary here (e.g. CONFORMANCE.md)")
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="FLOW=N",
        help="fail unless FLOW had no failure and at least N delegated passes",
    )
    parser.add_argument("--shard", type=parse_shard, help="K/N: only the tests whose id hashes to K of N")
    parser.add_argument("--record-delegated", type=Path, help="write the ids of the delegated passes here")
    parser.add_argument(
        "--expect-delegated", type=Path, help="fail if a subtest listed in this file ran and was not delegated"
    )
    args = parser.parse_args(argv)
    flows = [f for f in args.flows.split(",") if f]
    required = parse_requirements(args.require)
    flows += [f for f in required if f not in flows]

    args.out.mkdir(parents=True, exist_ok=True)
    report_path = (args.out / f"{args.suite}.json").resolve()
    run_pytest(args.suite, flows, report_path, args.workers, args.keyword, args.shard)
    if not report_path.exists():
        print(f"pytest wrote no report to {report_path}", file=sys.stderr)
        return 2
    report = json.loads(report_path.read_text())
    counts = count_by_flow(report, flows)
    command = "python backends/onednn/test/conformance/run_suite.py " + " ".join(argv or sys.argv[1:])
    markdown = summary_markdown(args.suite, counts, report, command.strip())
    (args.out / f"{args.suite}.md").write_text(markdown)
    if args.write_md:
        args.write_md.write_text(markdown)
    print(markdown.split("\n## ")[0])

    if args.record_delegated:
        args.record_delegated.write_text("".join(f"{key}\n" for key in sorted(delegated_passes(report))))
    problems = []
    if args.expect_delegated:
        expected = set(args.expect_delegated.read_text().split())
        problems += [f"{key}: delegated in the recorded run, not now" for key in lost_delegations(report, expected)]
    for flow, minimum in required.items():
        c = counts[flow]
        if c.failed:
            problems += [
                f"{flow}: {s['Test ID']}: {s.get('Result Detail')}: {s.get('Error', '')[:300]}" for s in c.failures
            ]
        if c.by_category["delegated"] < minimum:
            problems.append(f"{flow}: {c.by_category['delegated']} delegated passes, expected at least {minimum}")
    for problem in problems:
        print("FAILED", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
