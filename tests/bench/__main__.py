"""`python -m tests.bench`: run the benchmark."""

from __future__ import annotations

from tests.bench.cli import main

raise SystemExit(main())
