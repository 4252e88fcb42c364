"""The benchmark: factledger against plain sqlite3, measured in the same run on the same disk.

Run it as `python -m tests.bench` (see `tests/bench/cli.py`); pytest never collects it.
"""
