# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The model zoo end to end: lowered, run through OneDnnBackend and compared with eager PyTorch."""

from __future__ import annotations

import pytest
from executorch.backends.onednn.cli.zoo import MODELS, TEST_MODELS
from tester import run_and_compare

# Models the delegate must take whole: one delegate call, no compute left to ExecuTorch's kernels.
FULLY_DELEGATED = ["resnet_small", "mobilenet_v2_small", "mlp", "unet_small", "resnet18", "transformer_encoder"]


@pytest.mark.parametrize("name", [m for m in FULLY_DELEGATED if m in MODELS])
def test_model_is_one_delegate_call_and_matches_eager(name: str) -> None:
    model, inputs = MODELS[name]()
    outcome = run_and_compare(name, model, inputs)
    outcome.assert_delegated(exactly_one=True)
    outcome.assert_matches()


def test_every_test_model_is_covered_here() -> None:
    covered = set(FULLY_DELEGATED)
    assert set(TEST_MODELS) <= covered, f"zoo models without an end-to-end test: {set(TEST_MODELS) - covered}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_factories_are_deterministic(name: str) -> None:
    (first, first_inputs), (second, second_inputs) = MODELS[name](), MODELS[name]()
    assert not first.training, f"{name} is not in eval mode"
    for a, b in zip(first_inputs, second_inputs):
        assert a.equal(b), f"{name}: example inputs differ between calls"
    for (key, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert a.equal(b), f"{name}: {key} differs between calls"
