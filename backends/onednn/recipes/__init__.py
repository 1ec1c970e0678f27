# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Export recipes of the oneDNN delegate for `executorch.export`; importing this package registers them.

from executorch.backends.onednn.recipes import OneDnnRecipeType
from executorch.export import ExportRecipe, export

session = export(model, [inputs], export_recipe=ExportRecipe.get_recipe(OneDnnRecipeType.BF16))
session.save_pte_file("model.pte")
"""

from executorch.export import recipe_registry

from .onednn_recipe_provider import OneDnnRecipeProvider, OneDnnRecipeType

recipe_registry.register_backend_recipe_provider(OneDnnRecipeProvider())

__all__ = ["OneDnnRecipeProvider", "OneDnnRecipeType"]
