# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
from .fp32_islands import ComputeBf16FallbacksInFp32
from .onednn_partitioner import OneDnnPartitioner

__all__ = ["ComputeBf16FallbacksInFp32", "OneDnnPartitioner"]
