# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Example models and scripts for the oneDNN ExecuTorch delegate."""
