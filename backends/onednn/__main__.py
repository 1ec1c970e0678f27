"""`python -m executorch.backends.onednn`: the command line (cli/)."""

import sys

from .cli import main

sys.exit(main())
