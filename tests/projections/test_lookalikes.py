"""Tags and keys that look alike are one name or refused: NFC on every write and read, and
letters of one script (`projections._lookalikes`)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from eventlog import FactPublished, InvalidInputError, MemoryAdded
from projections import CrossTaskKB, SQLiteMemoryStore, load_persistent_memory
from projections._lookalikes import script_of
from projections._validation import check_key, check_tag, check_tags
from replay import history
from replay.cli import main

pytestmark = pytest.mark.read_models

NFC = "caf\u00e9"
NFD = unicodedata.normalize("NFD", NFC)
NOTE_NFC = "na\u00efve"
NOTE_NFD = unicodedata.normalize("NFD", NOTE_NFC)
CYRILLIC_E = "us\u0435rs"
"""`users` with a Cyrillic U+0435 for its `e`: it prints as `users`."""


def test_nfd_and_nfc_are_one_key_and_one_tag(store: SQLiteMemoryStore) -> None:
    """A fact published under an NFD tag and key is stored in NFC, and a reader asking in
    either form finds it; a memory entry tagged in NFD is found by its NFC tag."""
    assert NFC != NFD
    kb = CrossTaskKB(store, producer_task_id="t")
    kb.publish(NFD, NFD, "v1", scope="project")
    kb.publish(NFC, NFC, "v2", scope="project")
    store.add("learning", "a note", [NOTE_NFD])
    for asked, note in ((NFC, NOTE_NFC), (NFD, NOTE_NFD)):
        [fact] = kb.subscribe(asked, scope="project")
        assert (NFC, NFC, "v2") == (fact.tag, fact.key, fact.value)
        assert ["v1", "v2"] == [f.value for f in kb.history(asked, asked, scope="project")]
        assert ["a note"] == [entry.content for entry in store.list(tags=[note])]
        assert "a note" in load_persistent_memory(store, [note])
    published = [e.payload for e in store.event_log.read() if isinstance(e.payload, FactPublished)]
    assert {(NFC, NFC)} == {(p.tag, p.key) for p in published}
    [added] = [e.payload for e in store.event_log.read() if isinstance(e.payload, MemoryAdded)]
    assert (NOTE_NFC,) == added.tags


def test_audit_reads_normalize_what_they_are_asked_for(db_path: Path) -> None:
    """`history` by tag and key in NFD finds the versions written in NFC."""
    with SQLiteMemoryStore(db_path) as store:
        CrossTaskKB(store, producer_task_id="t").publish(NFC, NFC, "v", scope="project")
    found = history(db_path, tag=NFD, key=NFD)
    assert [(NFC, NFC)] == [(v.tag, v.key) for v in found.versions]


@pytest.mark.parametrize(
    "name",
    [
        CYRILLIC_E,
        "f\u03bfo",  # Greek omicron among Latin letters
        "p\u0430yp\u0430l",  # Cyrillic a
        "\u0441laude-code",  # Cyrillic es
        "\U0001d42esers",  # a mathematical bold u before Latin letters
        "\u2113ength",  # SCRIPT SMALL L before Latin letters
        "api-\u0645\u0633\u062a\u062e\u062f\u0645",  # Latin and Arabic
        "\u0434\u0430\u043d\u043d\u044b\u0435-data",  # Cyrillic and Latin
    ],
)
def test_a_name_mixing_scripts_is_refused_on_every_write_and_nothing_is_written(
    store: SQLiteMemoryStore, name: str
) -> None:
    """As a fact's tag, as its key, as a memory entry's tag: an error naming the letter out
    of place, and the log head does not move."""
    kb = CrossTaskKB(store, producer_task_id="t")
    head = store.event_log.head()
    with pytest.raises(InvalidInputError, match="mixes scripts: U\\+"):
        kb.publish(name, "k", "v", scope="project")
    with pytest.raises(InvalidInputError, match="key mixes scripts"):
        kb.publish("t", name, "v", scope="project")
    with pytest.raises(InvalidInputError, match=r"tags\[1\] mixes scripts"):
        store.add("learning", "x", ["ok", name])
    with pytest.raises(InvalidInputError, match="mixes scripts"):
        kb.subscribe(name, scope="project")
    assert head == store.event_log.head()


@pytest.mark.parametrize(
    "name",
    [
        "users",
        NFC,
        "\u00fcber-stra\u00dfe",
        "API\u63a5\u53e3",  # Latin and Han (Chinese)
        "\u30e6\u30fc\u30b6\u30fc\u540d",  # Katakana, the prolonged sound mark, Han
        "\u3072\u3089\u304c\u306a-kanji\u6f22\u5b57",  # Hiragana, Latin, Han
        "\uc0ac\uc6a9\uc790-id",  # Hangul and Latin
        "\u03b1\u03b2\u03b3",  # Greek alone
        "\u043f\u043e\u043b\u044c\u0437\u043e\u0432\u0430\u0442\u0435\u043b\u0438",  # Cyrillic
        "\u0645\u0633\u062a\u062e\u062f\u0645-2",  # Arabic and digits
        "5\u00b5s",  # the micro sign mixes with any script
        "x\u00b2 + y_1 / 50%",
    ],
)
def test_names_of_one_script_or_written_together_are_kept(name: str) -> None:
    """One script, digits, punctuation and symbols, and the Latin-Han-kana, Latin-Han-
    Bopomofo and Latin-Han-Hangul mixes of Japanese, Chinese and Korean are names."""
    assert (name, name, (name,)) == (check_tag(name), check_key(name), check_tags([name]))


def test_a_letter_counts_for_the_script_its_name_gives() -> None:
    """Latin in any width, Han from CJK and IDEOGRAPHIC names; letters of every script, and
    what is not a letter, count for none."""
    expected = {
        "a": "LATIN",
        "\uff41": "LATIN",  # FULLWIDTH LATIN SMALL LETTER A
        "\u0435": "CYRILLIC",
        "\u03bf": "GREEK",
        "\u4e00": "HAN",
        "\u3005": "HAN",  # IDEOGRAPHIC ITERATION MARK
        "\uff76": "KATAKANA",  # HALFWIDTH KATAKANA LETTER KA
        "\u30fc": None,  # KATAKANA-HIRAGANA PROLONGED SOUND MARK
        "\u02b0": None,  # MODIFIER LETTER SMALL H
        "\u00b5": None,  # MICRO SIGN
        "1": None,
        "-": None,
        "\u0301": None,  # COMBINING ACUTE ACCENT
    }
    assert expected == {char: script_of(char) for char in expected}


def test_the_command_line_refuses_a_lookalike_key_and_finds_an_nfd_tag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`share` with `users` spelled with a Cyrillic e: exit 1, one line naming the letter;
    `query --tag` in NFD finds what `share` wrote in NFC."""
    db = str(tmp_path / "m.db")
    assert 0 == main(["share", NFC, "v", "--tag", NFC, "--db", db])
    capsys.readouterr()
    assert 1 == main(["share", CYRILLIC_E, "v", "--tag", "api", "--db", db])
    assert "U+0435 CYRILLIC SMALL LETTER IE" in capsys.readouterr().err
    assert 0 == main(["query", "--tag", NFD, "--json", "--db", db])
    assert NFC in capsys.readouterr().out
