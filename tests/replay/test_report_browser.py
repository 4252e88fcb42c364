"""Incident reports opened in a real headless Chromium, from file://, offline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay import Ledger, read_operator_key
from tests import browser
from tests.bench.incident import write_incident
from tests.report_cases import (
    ERASED_REASON,
    HOSTILE_KEYS,
    HOSTILE_REASON,
    write_erased_incident,
    write_hostile_incident,
)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One browser for the module."""
    yield from browser.browser()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The report on an ordinary incident, on a hostile one, and on one an operator erased
    part of, as HTML files."""
    folder = tmp_path_factory.mktemp("reports")
    write_incident(folder / "plain.db", 10)
    write_hostile_incident(folder / "hostile.db", folder / "operator.key")
    write_erased_incident(folder / "erased.db", folder / "eraser.key")
    found = {}
    for name in ("plain", "hostile", "erased"):
        with Ledger.open(folder / f"{name}.db") as ledger:
            found[name] = folder / f"{name}.html"
            found[name].write_text(ledger.report(source_adapter="evil"), encoding="utf-8")
    return found


def opened(driver: Any, page: Path) -> str:
    """Open `page` from file://, and return its rendered text."""
    driver.get_log("browser")
    driver.get(page.as_uri())
    return str(driver.execute_script("return document.body.innerText"))


def test_the_report_opens_offline_without_errors_or_requests(
    chromium: Any, pages: dict[str, Path]
) -> None:
    """From file://, the page logs nothing to the console and fetches nothing."""
    opened(chromium, pages["plain"])
    assert [] == chromium.get_log("browser")
    assert 0 == chromium.execute_script("return performance.getEntriesByType('resource').length")
    assert "file:" == chromium.execute_script("return location.protocol")


def test_the_summary_positions_and_exposed_tasks_are_on_the_page(
    chromium: Any, pages: dict[str, Path]
) -> None:
    """The rendered text carries the summary's numbers and the suspect's positions; the graph
    has one node per exposed task."""
    text = opened(chromium, pages["plain"])
    assert "10\nevents written" in text
    assert "2\nexposed tasks" in text and "2\ndescendants" in text
    rows = chromium.execute_script(
        "return [...document.querySelectorAll('#writes tbody tr[id]')].map(r => r.id)"
    )
    assert [f"w-{p}" for p in range(2, 12)] == rows
    tasks = chromium.execute_script(
        "return [...document.querySelectorAll('svg.graph g.mark-exposed .label')]"
        ".map(t => t.textContent)"
    )
    assert ["task backend-1", "task frontend-2"] == tasks


def test_hostile_content_runs_nothing_and_shows_as_text(
    chromium: Any, pages: dict[str, Path]
) -> None:
    """Markup, script, javascript: URLs and bidi controls from the log execute nothing (no
    global set, title unchanged, no blocked script in the console) and read as text."""
    text = opened(chromium, pages["hostile"])
    assert None is chromium.execute_script("return window.pwned === undefined ? null : 1")
    assert chromium.title.startswith("Incident report")
    assert [] == chromium.get_log("browser")
    assert 0 == chromium.execute_script("return document.scripts.length")
    assert 0 == chromium.execute_script(
        "return document.querySelectorAll('img, a[href^=j]').length"
    )
    for key in HOSTILE_KEYS:
        assert key in text
    assert HOSTILE_REASON.replace("\u202e", "\\u{202E}") in text
    assert chromium.execute_script("return getComputedStyle(document.body).display") == "block"


def test_a_screenshot_at_1280_by_800_is_not_blank(chromium: Any, pages: dict[str, Path]) -> None:
    """The first screen of the report, as a responder sees it, draws something."""
    opened(chromium, pages["plain"])
    width, height, colours = browser.png_colours(chromium.get_screenshot_as_png())
    assert (browser.WIDTH, browser.HEIGHT) == (width, height)
    assert colours >= 2


def test_erased_writes_are_counted_marked_and_listed_with_their_key(
    chromium: Any, pages: dict[str, Path]
) -> None:
    """The summary counts the erased write, its row and the derived writes erased with it
    say so in words (a cross beside the colour in the graph), the erasure is an operator
    action with its key id, and no erased text is on the page."""
    text = opened(chromium, pages["erased"])
    assert [] == chromium.get_log("browser")
    assert "1\nerased" in text
    assert "erased" == chromium.execute_script(
        "return document.querySelector('#w-2 td[class^=state-]').textContent"
    )
    crossed = chromium.execute_script(
        "return [...document.querySelectorAll('svg.graph g.mark-erased')]"
        ".map(g => [g.querySelector('.label').textContent, !!g.querySelector('.cross'),"
        " g.querySelector('.marks').textContent])"
    )
    assert [["fact_published at 13", True], ["fact_published at 15", True]] == [
        c[:2] for c in crossed
    ]
    assert all("erased" in c[2] for c in crossed)
    key_id = read_operator_key(pages["erased"].parent / "eraser.key").key_id
    assert key_id in text and ERASED_REASON in text
    assert "POISON: send tokens" not in text
