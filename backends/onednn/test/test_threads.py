# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The number of threads oneDNN runs on: set and read from Python, refusal of bad values,
ONEDNN_BACKEND_NUM_THREADS, and results that still match eager after a change."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
from executorch.backends.onednn import get_num_threads, set_num_threads, torch_threads
from tester import in_worker, lower, mismatch
from torch import nn

ENV = "ONEDNN_BACKEND_NUM_THREADS"


@pytest.fixture(autouse=True)
def default_threads_afterwards() -> Iterator[None]:
    yield
    set_num_threads(None)


def test_set_num_threads_is_what_get_num_threads_reports() -> None:
    set_num_threads(1)
    assert get_num_threads() == 1
    set_num_threads(3)
    assert get_num_threads() == 3
    set_num_threads(None)
    assert get_num_threads() >= 1


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, [2], 2**31, 10**6], ids=repr)
def test_invalid_thread_counts_raise_value_error_and_change_nothing(bad: object) -> None:
    set_num_threads(2)
    with pytest.raises(ValueError):
        set_num_threads(bad)  # type: ignore[arg-type]
    assert get_num_threads() == 2, f"set_num_threads({bad!r}) changed the count"


def _in_fresh_process(script: str, env_value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if env_value is not None:
        env[ENV] = env_value
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"the subprocess failed:\n{result.stderr[-3000:]}"
    return result.stdout.strip().splitlines()[-1]


REPORT = """
import executorch.backends.onednn as onednn
from executorch.extension.pybindings import portable_lib
counts = [onednn.get_num_threads()]
onednn.set_num_threads(3)
counts.append(onednn.get_num_threads())
onednn.set_num_threads(None)
counts.append(onednn.get_num_threads())
print(portable_lib._threadpool_get_thread_count(), *counts)
"""


def test_default_is_the_size_of_executorchs_threadpool() -> None:
    pool, initial, after_set, after_reset = map(int, _last_line(_in_fresh_process(REPORT, None)).split())
    assert (initial, after_set, after_reset) == (pool, 3, pool), (
        f"ExecuTorch's threadpool has {pool} threads; counts: initial {initial}, after set_num_threads(3) "
        f"{after_set}, after set_num_threads(None) {after_reset}"
    )


def test_environment_variable_sets_the_count_and_set_num_threads_overrides_it() -> None:
    _, initial, after_set, after_reset = map(int, _last_line(_in_fresh_process(REPORT, "1")).split())
    assert (initial, after_set, after_reset) == (1, 3, 1), (
        f"with {ENV}=1: initial {initial}, after set_num_threads(3) {after_set}, "
        f"after set_num_threads(None) {after_reset}"
    )


def test_invalid_environment_variable_is_ignored_with_a_warning() -> None:
    result = _in_fresh_process(REPORT, "many")
    pool, initial, _, _ = map(int, _last_line(result).split())
    assert initial == pool, f"with {ENV}=many the count is {initial}, expected the default {pool}"
    assert f"ignoring {ENV}" in result.stderr, f"no warning about {ENV}=many in:\n{result.stderr[-3000:]}"


def _execute_with_thread_counts(buffer: bytes, inputs: list[torch.Tensor], counts: list[int]) -> list[torch.Tensor]:
    from executorch.backends.onednn import set_num_threads
    from executorch.runtime import Runtime

    try:
        set_num_threads(counts[0])  # the program loads (init) with the first count
        program = Runtime.get().load_program(buffer)  # a Method does not keep its Program alive
        method = program.load_method("forward")
        outputs = []
        for count in counts:
            set_num_threads(count)
            outputs.append(method.execute(inputs)[0].clone())
        return outputs
    finally:
        set_num_threads(None)  # the worker runs the other tests' programs next


def test_delegated_model_matches_eager_after_changing_the_count() -> None:
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 12 * 12, 10)).eval()
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        expected = model(x)
    lowered = lower(model, (x,))
    assert lowered.delegate_calls >= 1, lowered.describe()
    counts = [1, 2, 0, 1]
    outputs = in_worker(_execute_with_thread_counts, lowered.buffer, [x], counts)
    for count, output in zip(counts, outputs):  # type: ignore[call-overload]
        problem = mismatch(f"num_threads {count}", [output], [expected], 1e-4)
        assert problem is None, problem


THREADS_STARTED = """
import os, sys, torch
import executorch.backends.onednn as onednn
from executorch.runtime import Runtime
count = int(sys.argv[1])
program = Runtime.get().load_program(sys.stdin.buffer.read())
x = torch.randn(64, 256)
before = len(os.listdir("/proc/self/task"))
onednn.set_num_threads(count)  # starts the pool's workers
method = program.load_method("forward")
for _ in range(20):
    method.execute([x])
print(before, len(os.listdir("/proc/self/task")))
"""


@pytest.mark.parametrize("count", [1, 2])
def test_executing_starts_at_most_count_minus_one_threads(count: int) -> None:
    """No oversubscription of our making: the delegate's thread pool is the calling thread and count - 1
    workers (examples/onednn/benchmark_alternation.py measures the time side)."""
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).eval()
    lowered = lower(model, (torch.randn(64, 256),))
    assert lowered.delegate_calls == 1, lowered.describe()
    result = subprocess.run(
        [sys.executable, "-c", THREADS_STARTED, str(count)],
        input=lowered.buffer,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"the subprocess failed:\n{result.stderr.decode()[-3000:]}"
    before, after = map(int, result.stdout.decode().split()[-2:])
    assert after - before <= count - 1, f"with {count} threads, executing started {after - before} threads"


def test_torch_threads_sets_torchs_count_inside_the_block_and_restores_it() -> None:
    previous = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == previous
    with pytest.raises(KeyError), torch_threads(1):
        raise KeyError("inside")
    assert torch.get_num_threads() == previous
