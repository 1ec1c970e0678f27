# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`executorch.export` with the oneDNN recipes: each exports a delegated program that runs and matches eager."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn.recipes import OneDnnRecipeType
from executorch.export import ExportRecipe, export, recipe_registry
from tester import execute

INT8_RECIPES = (OneDnnRecipeType.DYNAMIC_INT8_LINEAR, OneDnnRecipeType.PT2E_INT8_STATIC)
TOLERANCE = {
    OneDnnRecipeType.FP32: 1e-4,
    OneDnnRecipeType.BF16: 3e-2,
    OneDnnRecipeType.DYNAMIC_INT8_LINEAR: 5e-2,
    OneDnnRecipeType.PT2E_INT8_STATIC: 5e-2,
}


def _model() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4)
    )
    return model.eval(), torch.randn(1, 3, 8, 8)


def test_the_recipes_are_registered_under_onednn() -> None:
    assert "onednn" in recipe_registry.list_backends()
    assert set(recipe_registry.get_supported_recipes("onednn")) == set(OneDnnRecipeType)


@pytest.mark.parametrize(
    "recipe",
    list(OneDnnRecipeType),
)
def test_a_recipe_exports_a_delegated_program_that_matches_eager(recipe: OneDnnRecipeType) -> None:
    model, x = _model()
    calibration = [(x,)] + [(torch.randn_like(x),) for _ in range(7)]
    session = export(model, calibration, export_recipe=ExportRecipe.get_recipe(recipe))
    buffer = session.get_pte_buffer()
    assert b"OneDnnBackend" in buffer
    got = execute(buffer, (x,))[0]
    with torch.no_grad():
        want = model(x)
    error = ((got - want).abs().max() / want.abs().max()).item()
    assert error <= TOLERANCE[recipe], f"{recipe.value}: relative error {error}"
