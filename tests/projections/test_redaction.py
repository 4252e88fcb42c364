"""redact_value masks personal data and leaves near misses alone."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections import redact_value
from projections._redaction import MASK, luhn_valid
from projections._visible import is_invisible


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


@pytest.mark.parametrize(
    "text",
    [
        "jos\u00e9@example.com",
        "alice@ex\u00e4mple.com",
        "4111  1111  1111  1111",
        "4111.1111.1111.1111",
        "4111/1111/1111/1111",
        "4111_1111_1111_1111",
        "4111\n1111\n1111\n1111",
        "4111\t1111\t1111\t1111",
        "4111 -.1111/_1111\t\n1111",
        "4111\r\n 1111 \t1111__1111",
        "123\u201145\u20116789",
        "+44 (0)20 7946 0958",
    ],
)
def test_the_issues_examples_are_masked_whole(text: str) -> None:
    """Issue 25's examples: the whole address, number or card, not a part of it."""
    assert f"see {MASK} now" == redact_value(f"see {text} now")


@pytest.mark.parametrize(
    "text",
    [
        "jose\u0301@exa\u0308mple.com",
        "\u5c71\u7530@\u4f8b\u3048.\u30c6\u30b9\u30c8",
        "user@\u0909\u0926\u093e\u0939\u0930\u0923.\u092a\u0930\u0940\u0915\u094d\u0937\u093e",
        "\u043f\u0435\u0442\u044f@\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444",
        "alice@xn--exmple-cua.com",
        "alice@example\u3002com",
        "o'brien@example.com",
        "first.last+tag@mail.example.co.uk",
        "alice@example.com-foo",
        '"john doe"@example.com',
        "\u013fa@example.com",
        "jos\u00b4e@example.com",
    ],
)
def test_unicode_and_idn_addresses_are_masked_whole(text: str) -> None:
    """Local parts and domains in any script, combining marks (decomposed accents, Indic
    vowel signs) included, punycode and the ideographic full stop as a dot."""
    assert f"mail {MASK}." == redact_value(f"mail {text}.")


@pytest.mark.parametrize(
    "dash", ["-", *map(chr, range(0x2010, 0x2016)), "\u2212", "\ufe63", "\uff0d", "\ufe58"]
)
def test_ssn_with_any_dash_is_masked(dash: str) -> None:
    """NFKC folds only the fullwidth and small hyphen-minus to `-` (U+2011 to U+2010): every
    dash punctuation character and the minus sign count as the dash."""
    assert f"ssn {MASK}" == redact_value(f"ssn 123{dash}45{dash}6789")


@pytest.mark.parametrize(
    "text",
    [
        "+1 (555) 123-4567",
        "+49 (0) 30 1234567",
        "+7 (495) 123-45-67",
        "+33 (0)1 42 68 53 00",
        "+44\u00a0(0)20\u00a07946\u00a00958",
        "+\u0664\u0664 20 7946 0958",
        "\uff0b44 \uff080\uff0920 7946 0958",
    ],
)
def test_international_phones_with_groups_in_parentheses_are_masked_whole(text: str) -> None:
    """A trunk prefix `(0)` or an area code in parentheses, no-break spaces, other digits."""
    assert f"call {MASK} today" == redact_value(f"call {text} today")


@pytest.mark.parametrize(
    "text",
    [
        "visa 4111\u200d1111\u00ad1111\u202e1111",
        "visa 4111\u20661111\u20691111\ufeff1111",
        "visa \uff14\uff11\uff11\uff11 1111 1111 1111",
        "visa \u0664\u0661\u0661\u0661111111111111",
        "visa alice\u200d@example\u00ad.com",
        "visa ali\u202ece@example.com",
    ],
)
def test_invisible_characters_and_other_digits_do_not_hide_personal_data(text: str) -> None:
    """Zero-width joiners, soft hyphens, bidi controls, byte order marks are left out of the
    reading; fullwidth digits fold; Arabic-Indic digits are digits."""
    assert f"visa {MASK}" == redact_value(text)


@pytest.mark.parametrize(
    "text",
    [
        "dates 2026-12-02 2026-12-02",
        "dates 2026/12/02 2026/12/02",
        "hosts 192.168.100.200 10.0.0.7",
        "at 2026-12-02T22:07:51.123456789Z",
        "sha256:" + "4" * 64,
        "hash 4111111111111111" + "a" * 48,
        "uuid 550e8400-e29b-41d4-a716-446655440000",
        "version 10.11.12",
        "user@10.0.0.1",
        "ssn-like 123-45-6789-0000",
        "ssn-like 123\u201345\u20136789\u20130",
        "position 4111111111111111x",
        'quoted "not an address" @example.com',
    ],
)
def test_what_the_product_prints_is_not_masked(text: str) -> None:
    """ISO dates and IPv4 addresses are no card even when their digits pass Luhn (the first
    three do); hashes, ids, times and versions are left alone."""
    assert text == redact_value(text)


@pytest.mark.parametrize(
    "text",
    [
        "address literal user@[192.168.0.1]",
        "card split by four 4111 -- 1111 -- 1111 -- 1111",
    ],
)
def test_known_gaps_stay_visible(text: str) -> None:
    """Documented limits (docs/command-line.md): address literals; more than three
    separators between two digits."""
    assert text == redact_value(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("on 2026-12-02 4111 1111 1111 1111", f"on 2026-12-02 {MASK}"),
        ("on 2026-12-02 4111111111111111", f"on 2026-12-02 {MASK}"),
        ("host 10.0.0.1 4111 1111 1111 1111", f"host 10.0.0.1 {MASK}"),
        ("4111 1111 1111 1111 2026-12-02", f"{MASK} 2026-12-02"),
        ("order 12 4111 1111 1111 1111", f"order 12 {MASK}"),
        ("order 7 4111111111111111", f"order 7 {MASK}"),
        ("4111 1111 1111 1111 22 left", f"{MASK} 22 left"),
        ("amex 1 3782 822463 10005 x", f"amex 1 {MASK} x"),
    ],
)
def test_a_card_beside_other_digits_is_masked(text: str, expected: str) -> None:
    """A date, an IPv4 address or another number next to a grouped card neither hides it
    nor is masked with it."""
    assert expected == redact_value(text)


def test_the_near_miss_dates_and_hosts_do_pass_luhn() -> None:
    """So the exclusions above are what keeps them, not the checksum."""
    for text in ("2026-12-02 2026-12-02", "192.168.100.200 10.0.0.7"):
        assert luhn_valid(re.sub(r"\D", "", text))


def test_a_huge_input_completes() -> None:
    """1 MB of each shape that could make a pattern backtrack is read in one pass (every
    repeated piece is told from what follows it; measured by hand: at most about 1 s)."""
    for text in (
        "1 " * 524_288,
        "a@" * 524_288,
        "a@" + "b." * 524_287,
        "a.b+c-" * 174_762 + "@",
        "+1(2)" * 209_715,
        "4\u200b" * 524_288,
        "1-" * 524_288,
    ):
        assert len(redact_value(text)) <= len(text) + len(MASK)


def _idna_letter(char: str) -> bool:
    """Whether `char` is a letter whose compatibility form IDNA keeps: letters, digits and
    combining marks (not U+FDFA, whose form holds spaces)."""
    return all(
        part.isalnum() or unicodedata.category(part).startswith("M")
        for part in unicodedata.normalize("NFKC", char)
    )


def _no_delimiter(local: str) -> bool:
    """Whether no character of `local` is invisible or reads as a delimiter of addresses."""
    reading = unicodedata.normalize("NFKC", local)
    return not any(map(is_invisible, local)) and not re.search(r'[\s@<>()\[\]\\,;:"`{|}/]', reading)


_LETTERS = st.characters(categories=("L",)).filter(lambda char: not is_invisible(char))
_LABEL = st.text(_LETTERS.filter(_idna_letter), min_size=1, max_size=12)


@given(
    local=st.text(
        st.one_of(_LETTERS, st.characters(categories=("N", "M", "P", "S"))), min_size=1
    ).filter(_no_delimiter),
    labels=st.lists(_LABEL, min_size=1, max_size=3),
    top=_LABEL,
)
def test_a_masked_address_shows_neither_its_local_part_nor_its_domain(
    local: str, labels: list[str], top: str
) -> None:
    """An address whose local part holds any letter, digit, mark, punctuation or symbol but
    the delimiters, at a domain of letters in any script, is masked whole between spaces."""
    address = f"{local}@{'.'.join([*labels, top])}"
    assert f"to {MASK} now" == redact_value(f"to {address} now")


_SEPARATORS = st.text(st.sampled_from("  \t\n._/-\u2011\u2013\u2212"), max_size=3)


@given(
    digits=st.text(st.sampled_from("0123456789"), min_size=12, max_size=18),
    separators=st.lists(_SEPARATORS, min_size=18, max_size=18),
)
def test_a_luhn_valid_card_split_any_way_is_masked_whole(
    digits: str, separators: list[str]
) -> None:
    """Any separators, mixed and repeated (up to three between two digits), still Luhn-checked."""
    check = next(d for d in "0123456789" if luhn_valid(digits + d))
    number = digits + check
    split = number[0] + "".join(sep + d for sep, d in zip(separators, number[1:], strict=False))
    masked = redact_value(f"card {split} ok")
    if _looks_like_a_date_or_host(split):
        return
    assert f"card {MASK} ok" == masked


def _looks_like_a_date_or_host(text: str) -> bool:
    return bool(re.search(r"\d{4}[-/.]\d\d[-/.]\d\d|\d+\.\d+\.\d+\.\d+", text))


_NEAR_PERSONAL = st.text(
    st.one_of(st.sampled_from("0123456789 @.-+()_/\t\naZ\u00e9\u2011\u200b\uff10"), st.characters())
)
"""Text dense in the characters the patterns look at."""


@given(_NEAR_PERSONAL)
def test_masking_is_idempotent(text: str) -> None:
    """Masking what was masked changes nothing more."""
    once = redact_value(text)
    assert once == redact_value(once)


@given(_NEAR_PERSONAL)
def test_everything_outside_a_mask_is_the_original_text(text: str) -> None:
    """The shown text is pieces of the original, in order, with masks between them."""
    rest = text
    for piece in redact_value(text).split(MASK):
        assert piece in rest
        rest = rest[rest.index(piece) + len(piece) :]


@given(st.text(st.characters(exclude_characters="@\uff20\ufe6b", exclude_categories=("Nd",))))
def test_text_without_at_signs_or_digits_is_unchanged(text: str) -> None:
    """No address and no number: nothing to mask, every character shown as it was."""
    assert text == redact_value(text)
