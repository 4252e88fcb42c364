"""A headless Chromium for the tests that open a report, driven with selenium.

Debian's `chromium` and `chromium-driver` (`/usr/bin/chromium`, `/usr/bin/chromedriver`);
`.ci/run` installs them. Without them the browser tests skip, or fail under
`FACTLEDGER_REQUIRE_BROWSER=1`, as CI sets it.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1280, 800


def browser() -> Iterator[Any]:
    """A headless Chromium at 1280x800 that records the console, for one test module."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium is not installed (pip install -e '.[dev]')")
    chromium = shutil.which("chromium") or CHROMIUM
    driver_path = shutil.which("chromedriver") or CHROMEDRIVER
    if not (os.path.exists(chromium) and os.path.exists(driver_path)):
        missing("no Chromium (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


def missing(why: str) -> None:
    """Skip, or fail when CI requires the browser tests."""
    if os.environ.get("FACTLEDGER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"FACTLEDGER_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def png_colours(png: bytes, most: int = 2) -> tuple[int, int, int]:
    """A PNG's width, height and how many distinct pixels it has (counting stops at `most`)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        chunks.append((png[offset + 4 : offset + 8], png[offset + 8 : offset + 8 + length]))
        offset += 12 + length
    header = next(data for kind, data in chunks if kind == b"IHDR")
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert (depth, colour) in ((8, 2), (8, 6)), "an 8-bit RGB or RGBA screenshot"
    size = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(data for kind, data in chunks if kind == b"IDAT"))
    stride = width * size
    previous = bytearray(stride)
    seen: set[bytes] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - size] if i >= size else 0
            up, corner = previous[i], previous[i - size] if i >= size else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                best = min((abs(guess - left), 0, left), (abs(guess - up), 1, up),
                           (abs(guess - corner), 2, corner))[2]  # fmt: skip
                line[i] = (line[i] + best) & 0xFF
        seen.update(bytes(line[i : i + size]) for i in range(0, stride, size * 7))
        if len(seen) >= most:
            break
        previous = line
    return width, height, len(seen)
