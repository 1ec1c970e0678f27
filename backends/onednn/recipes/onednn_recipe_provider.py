# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The recipes: fp32, bf16 (computed in bf16 inside the delegate), dynamic int8 linear layers, and static
int8 (PT2E with OneDnnQuantizer, calibrated on the example inputs `executorch.export` is given)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from executorch.export import BackendRecipeProvider, ExportRecipe, LoweringRecipe, QuantizationRecipe, RecipeType

from ..partition import OneDnnPartitioner
from ..quantizer import OneDnnQuantizer


class OneDnnRecipeType(RecipeType):
    FP32 = "onednn_fp32"
    BF16 = "onednn_bf16"
    DYNAMIC_INT8_LINEAR = "onednn_dynamic_int8_linear"
    PT2E_INT8_STATIC = "onednn_pt2e_int8_static_per_channel"

    @classmethod
    def get_backend_name(cls) -> str:
        return "onednn"


class OneDnnRecipeProvider(BackendRecipeProvider):
    @property
    def backend_name(self) -> str:
        return "onednn"

    def get_supported_recipes(self) -> Sequence[RecipeType]:
        return list(OneDnnRecipeType)

    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> ExportRecipe | None:
        """kwargs go to OneDnnPartitioner (external_weights, weight_checksums)."""
        if recipe_type not in self.get_supported_recipes():
            return None
        allowed = {"external_weights", "weight_checksums"}
        if set(kwargs) - allowed:
            logging.warning("oneDNN recipe %s ignores %s", recipe_type.value, sorted(set(kwargs) - allowed))
        options = {key: value for key, value in kwargs.items() if key in allowed}
        partitioner = OneDnnPartitioner(
            precision="bf16" if recipe_type == OneDnnRecipeType.BF16 else "fp32",
            dynamic_int8=recipe_type == OneDnnRecipeType.DYNAMIC_INT8_LINEAR,
            **options,
        )
        quantization = None
        if recipe_type == OneDnnRecipeType.PT2E_INT8_STATIC:
            quantization = QuantizationRecipe(quantizers=[OneDnnQuantizer()])
        return ExportRecipe(
            name=recipe_type.value,
            quantization_recipe=quantization,
            lowering_recipe=LoweringRecipe(partitioners=[partitioner]),
        )
