"""Strings from the log made inert for a report: invisible characters shown as the prompt path
shows them (`projections.escape_invisible`), then escaped for HTML or Markdown, so nothing a
writer chose (`<script>`, `</style>`, a `javascript:` URL, a bidi control) acts in the report.
"""

from __future__ import annotations

import html
import re

from projections import escape_invisible

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()!|~>#])")


def html_text(value: object) -> str:
    """`value` as text for HTML (element content or a quoted attribute), on one line."""
    return html.escape(escape_invisible(str(value), keep_newlines=False), quote=True)


def html_block(value: object) -> str:
    """`value` as text for HTML, its newlines kept (inside `<pre>`)."""
    return html.escape(escape_invisible(str(value)), quote=True)


def markdown_text(value: object) -> str:
    """`value` as literal Markdown text on one line (a table cell included): HTML escaped,
    every character Markdown or a table gives meaning to backslash-escaped."""
    shown = html.escape(escape_invisible(str(value), keep_newlines=False), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", shown)
