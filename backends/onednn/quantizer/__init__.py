# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
from .onednn_quantizer import OneDnnQuantizer

__all__ = ["OneDnnQuantizer"]
