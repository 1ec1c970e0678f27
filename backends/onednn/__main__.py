# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`python -m executorch.backends.onednn`: the command line (cli/)."""

import sys

from .cli import main

sys.exit(main())
