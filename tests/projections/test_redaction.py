"""redact_value masks personal data and leaves near misses alone."""

from __future__ import annotations

import pytest

from projections import redact_value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail alice@example.com now", "mail [REDACTED] now"),
        ("a.b+tag@sub.example.co.uk", "[REDACTED]"),
        ("call 555-123-4567", "call [REDACTED]"),
        ("call (555) 123-4567.", "call [REDACTED]."),
        ("call +1 555 123 4567", "call [REDACTED]"),
        ("intl +44 20 7946 0958", "intl [REDACTED]"),
        ("ssn 123-45-6789", "ssn [REDACTED]"),
        ("visa 4111 1111 1111 1111", "visa [REDACTED]"),
        ("visa 4111-1111-1111-1111", "visa [REDACTED]"),
        ("amex 378282246310005", "amex [REDACTED]"),
        ("19 digits 6011000990139424009", "19 digits [REDACTED]"),
    ],
)
def test_personal_data_is_masked(text: str, expected: str) -> None:
    """E-mail, phone, SSN and Luhn-valid card numbers become [REDACTED]."""
    assert expected == redact_value(text)


@pytest.mark.parametrize(
    "text",
    [
        "card-like 4111 1111 1111 1112",
        "twelve digits 411111111111",
        "twenty digits 41111111111111111111",
        "ssn-like 000-12-3456",
        "ssn-like 666-12-3456",
        "ssn-like 123-00-4567",
        "ssn-like 123-45-67890",
        "date 2026-11-29",
        "time 12:30:45",
        "version 1.2.3.4",
        "ip 192.168.100.200",
        "decorator @dataclass",
        "user@localhost",
        "short number 555-1234",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "sum 1+2=3",
    ],
)
def test_near_misses_are_not_masked(text: str) -> None:
    """Strings that only resemble personal data are left unchanged."""
    assert text == redact_value(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("visa 4111\u200b1111\u200b1111\u200b1111 ok", "visa [REDACTED] ok"),
        ("visa 4111 1111\u2060 1111 1111", "visa [REDACTED]"),
        ("visa \uff14\uff11\uff11\uff11111111111111", "visa [REDACTED]"),
        ("mail alice\uff20example.com now", "mail [REDACTED] now"),
        ("mail ali\u00adce@exam\u200bple.com", "mail [REDACTED]"),
        ("call +4915112345678.", "call [REDACTED]."),
        ("call +49 151 12345678", "call [REDACTED]"),
        ("call +33 1 42 68 53 00", "call [REDACTED]"),
        ("call \uff0b4915112345678", "call [REDACTED]"),
        ("ssn 123\u200b-45-6789", "ssn [REDACTED]"),
    ],
)
def test_personal_data_hidden_by_lookalikes_is_masked_whole(text: str, expected: str) -> None:
    """Matching runs on the NFKC reading without invisible characters, and the whole stretch
    of the original it came from is masked; international numbers lose their `+` too."""
    assert expected == redact_value(text)


@pytest.mark.parametrize(
    "text",
    [
        "zero\u200bwidth \uff21\uff22\uff23 \ufb01le \u3164 kept as they were",
        "line one\nline two\talice",
        "path C:\\users\\x",
        "digits split by a newline 4111 1111\n1111 1112",
    ],
)
def test_text_outside_a_match_is_shown_as_it_was(text: str) -> None:
    """Normalizing is only for matching: nothing outside a match changes."""
    assert text == redact_value(text)


def test_lines_stay_apart() -> None:
    """Whitespace is kept for matching, so an address never swallows the line before it."""
    assert "line1\n[REDACTED]" == redact_value("line1\nalice@example.com")


def test_redaction_never_changes_stored_data(store: object) -> None:
    """Redaction works on a copy; what is stored stays verbatim."""
    from projections import CrossTaskKB, SQLiteMemoryStore

    assert isinstance(store, SQLiteMemoryStore)
    kb = CrossTaskKB(store)
    kb.publish("t", "k", "reach me at bob@example.com", scope="project")
    [fact] = list(kb.subscribe("t", scope="project"))
    assert "reach me at [REDACTED]" == redact_value(fact.value)
    assert "reach me at bob@example.com" == next(kb.subscribe("t", scope="project")).value
