"""Child process for the memory metric: run verify or rebuild on a log, print peak RSS as JSON.

`python -m tests.bench.rss_worker verify|rebuild PATH`. Peak RSS is VmHWM from
/proc/self/status, read once after the imports (the floor) and once after the operation.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from tests.bench.quiet import silence_logs


def peak_rss_kib() -> int:
    """VmHWM of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def verify(path: Path) -> tuple[str, int]:
    """Run replay.verify, or eventlog.verify_chain until it exists."""
    try:
        audit = importlib.import_module("replay")
    except ImportError:
        from eventlog import open_log, verify_chain

        log = open_log(path, read_only=True)
        report = verify_chain(log)
        log.close()
        return "eventlog.verify_chain", report.checked
    return "replay.verify", int(audit.verify(path).checked)


def rebuild(path: Path) -> tuple[str, int]:
    """Run replay.rebuild without swapping."""
    module = importlib.import_module("replay")
    return "replay.rebuild", int(module.rebuild(path, swap=False).events)


def main(argv: list[str]) -> int:
    """Run one operation and print its peak RSS figures as JSON."""
    silence_logs()
    operation, path = argv[0], Path(argv[1])
    floor = peak_rss_kib()
    tool, events = (verify if operation == "verify" else rebuild)(path)
    peak = peak_rss_kib()
    print(
        json.dumps(
            {
                "tool": tool,
                "events": events,
                "floor_kib": floor,
                "process_peak_kib": peak,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
