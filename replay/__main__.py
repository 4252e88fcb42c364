"""`python -m replay` runs the `factledger` command."""

from __future__ import annotations

import sys

from replay.cli import main

sys.exit(main())
