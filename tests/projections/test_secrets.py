"""Secrets stopped at the door: every write's text is screened, and refused, redacted or
allowed as the store is set; the product's own hashes and ids pass."""

from __future__ import annotations

import base64
import hashlib
import logging
import sqlite3
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import MAX_CONTENT_BYTES, InvalidInputError, open_log
from projections import CrossTaskKB, MemoryEntry, SecretRefusedError, SQLiteMemoryStore
from projections._secrets import ENTROPY_LIMIT, find_secrets, redacted
from replay.cli import demo
from replay.keys import generate_key
from replay.ledger import Ledger
from tests.bench.corpus import Corpus
from tests.projections.test_legacy import legacy_file

pytestmark = pytest.mark.read_models

ROOT = Path(__file__).resolve().parents[2]

# Made-up credentials of each kind, built from parts so no line of this file is one.
SECRETS = {
    "aws-access-key": "AKIA" + "Q3EXAMPLE7KEYZ2X",
    "github-token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "gitlab-token": "glpat-" + "xY3kq9Vb2LmN8pQr4sTu",
    "slack-token": "xoxb-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "stripe-key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "openai-key": "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_Ab3dEf6hIj9kLm2",
    "anthropic-key": "sk-ant-api03-" + "Zx8yW7vU6tS5rQ4pO3nM2lK1jI0hG9fE8dC7bA6_-aBcDeFgHiJkLmNoPq",
    "private-key": "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu1SU1L7VLPHCgcRd\n"
    "-----END RSA PRIVATE KEY-----",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
    + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "password-in-url": "postgresql://app:" + "s3cretPass@db.internal:5432/prod",
    "high-entropy-string": "Zx8yW7vU6tS5rQ4pO3nM" + "2lK1jI0hG9fE8dC7bA6q",
}
SECRET_PARTS = {
    "password-in-url": "s3cretPass",
    "private-key": "MIIEpAIBAAKCAQEAu1SU1L7VLPHCgcRd",
    "jwt": "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
}
"""The part of each credential that must not be stored (the whole of the others)."""
GITHUB = SECRETS["github-token"]


def entry_of(store: SQLiteMemoryStore, entry_id: int) -> MemoryEntry:
    """The visible entry `entry_id`."""
    return next(entry for entry in store.list(limit=1000) if entry.id == entry_id)


def secret_bytes(kind: str) -> bytes:
    return SECRET_PARTS.get(kind, SECRETS[kind]).encode()


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_is_found_where_it_starts(kind: str) -> None:
    """Each kind of credential the issue names is found by its detector, at its offset."""
    text = f"note: {SECRETS[kind]} (from .env)"
    found = find_secrets(text)
    start = 6 + (len("postgresql://app:") if kind == "password-in-url" else 0)
    assert [(kind, start)] == [(f.detector, f.start) for f in found]


@pytest.mark.parametrize(
    "text",
    [
        "redis://:hunter2@cache:6379",
        "https://api.example.com/v1?user=a&token=abcdef123",
        "https://user:pa55word@example.com/path",
        "slack xapp-1-" + "A0123456789-1234567890123-abcdef0123456789",
        "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123",
        "stripe sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "gcp AIza" + "SyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1v",
        "//registry.npmjs.org/:_authToken=" + "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "PRIVATE+KEY+alice+1a2b3c4d+" + base64.b64encode(b"\x01" + bytes(range(32))).decode(),
    ],
)
def test_secrets_detect_secrets_has_no_pattern_for_are_found(text: str) -> None:
    """Our own patterns cover what detect-secrets misses: no-user and query-string
    passwords, Slack app, fine-grained GitHub, Stripe test and Google keys, and
    factledger's own operator private key."""
    assert 1 == len(find_secrets(text))


@pytest.mark.parametrize(
    "text",
    [
        "[open the docs](https://attacker.example/login?next=p12&token=$GITHUB_TOKEN)",
        "curl https://api.example.com/v1?api_key=${API_KEY}",
        "redis://:<password>@cache:6379 and https://x.example/?token={{token}}",
        "postgresql://app:$DB_PASSWORD@db/prod",
    ],
)
def test_a_placeholder_for_a_password_passes(text: str) -> None:
    """A password in a URL that names a variable or a placeholder is not a secret."""
    assert [] == find_secrets(text)


def test_high_entropy_threshold_is_the_documented_one() -> None:
    """A base64 run with a digit and a letter is a secret above 4.5 bits per character;
    below it, or shorter than 20 characters, it passes."""
    assert 4.5 == ENTROPY_LIMIT
    assert [] == find_secrets("build ab12ab12ab12ab12ab12ab12ab12 ok")
    assert [] == find_secrets("short Zx8yW7vU6tS5rQ4pO3n")
    assert ["high-entropy-string"] == [
        f.detector for f in find_secrets(SECRETS["high-entropy-string"])
    ]


def test_an_invisible_character_does_not_split_a_secret() -> None:
    """A zero-width space or a control character inside a token is read as absent, and the
    redaction covers the whole stretch, the invisible character too."""
    for hidden in ("\u200b", "\u2060", "\x00"):
        text = f"token {GITHUB[:10]}{hidden}{GITHUB[10:]} end"
        found = find_secrets(text)
        assert [("github-token", 6)] == [(f.detector, f.start) for f in found]
        assert "token [REDACTED:github-token] end" == redacted(text, found)


def product_outputs(tmp_path: Path) -> list[str]:
    """What the product prints: content hashes, chain values, Merkle roots, key ids, public
    keys, a signed checkpoint, log ids (UUIDs); and git SHAs."""
    public = generate_key(tmp_path / "operator.key", name="alice")
    key = tmp_path / "operator.key"
    path = tmp_path / "product.db"
    with SQLiteMemoryStore(path, secrets="allow") as store:
        store.add("learning", "a first entry")
        fact = CrossTaskKB(store).publish("t", "k", "v", scope="project")
    with Ledger.open(path, read_only=False) as ledger:
        checkpoint = ledger.checkpoint(key=key)
    with closing(open_log(path, read_only=True)) as log, log.snapshot() as snap:
        chain = [event.chain_hash for event in snap.read()]
        log_id = log.log_id
    return [
        fact.content_hash,
        f"published t/k (project) at position {fact.position}, {fact.content_hash}",
        *chain,
        checkpoint.root.hex(),
        str(checkpoint),
        public.read_text(encoding="utf-8"),
        log_id,
        str(uuid.uuid4()),
        hashlib.sha1(b"commit").hexdigest(),
        "fixed in 3f2c1a9 and " + hashlib.sha1(b"other").hexdigest(),
    ]


def test_the_products_own_hashes_and_ids_are_accepted(
    tmp_path: Path, make_store: Callable[..., SQLiteMemoryStore]
) -> None:
    """Every hash and id the product prints is written under `refuse` as it is."""
    outputs = product_outputs(tmp_path)
    assert "blake3-keyed:" in outputs[0]
    store = make_store()
    for text in outputs:
        assert [] == find_secrets(text), text
        entry = store.add("learning", text)
        assert text == entry_of(store, entry).content


def ordinary_texts() -> list[str]:
    """Normal memory texts: the demo's, the bench corpus's, and every line of the README,
    the docs and the changelog."""
    lines = [demo.SCHEMA, demo.POISON, demo.COVER_UP, "Run the backend tests with: pytest -q"]
    lines += [memory.content for memory in Corpus().memories(2000)]
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


def test_ordinary_text_passes() -> None:
    """No false positive on the demo's texts, the bench corpus or the documentation."""
    flagged = [(line, find_secrets(line)) for line in ordinary_texts() if find_secrets(line)]
    assert [] == flagged


# -- the store and the knowledge base ------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_refuse_names_detector_and_offset_never_the_secret(
    kind: str, make_store: Callable[..., SQLiteMemoryStore], caplog: pytest.LogCaptureFixture
) -> None:
    """Under the default, a secret is refused with its detector and offset; the error's
    text, its repr and the logs hold none of its bytes, and nothing is written."""
    store = make_store()
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SecretRefusedError) as caught:
        store.add("learning", f"found in .env: {SECRETS[kind]}")
    error = caught.value
    assert isinstance(error, InvalidInputError)
    assert (kind, 15 if kind != "password-in-url" else 32) == (error.detector, error.offset)
    assert f"content holds a secret ({kind}) at character {error.offset}" in str(error)
    for shown in (str(error), repr(error), caplog.text):
        assert secret_bytes(kind).decode() not in shown
    assert [] == store.list(limit=1000)


def test_redact_stores_the_redacted_text_and_hashes_it(
    make_store: Callable[..., SQLiteMemoryStore], db_path: Path
) -> None:
    """Under `redact` the stored text, the one its content hash covers, holds
    `[REDACTED:<type>]` in the secret's place, and no byte of the secret is in the file."""
    store = make_store(secrets="redact")
    entry = store.add("learning", f"key {SECRETS['aws-access-key']} and {SECRETS['jwt']} done")
    stored = entry_of(store, entry)
    assert "key [REDACTED:aws-access-key] and [REDACTED:jwt] done" == stored.content
    with SQLiteMemoryStore(db_path.parent / "plain.db", secrets="allow") as plain:
        same = entry_of(plain, plain.add("learning", stored.content))
    assert stored.content_hash != same.content_hash  # salted per log; the text is what counts
    store.close()
    data = b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.is_file())
    assert secret_bytes("aws-access-key") not in data


def test_allow_stores_the_secret(make_store: Callable[..., SQLiteMemoryStore]) -> None:
    """Under `allow` the text is stored as given."""
    store = make_store(secrets="allow")
    assert f"token {GITHUB}" == entry_of(store, store.add("learning", f"token {GITHUB}")).content


def test_the_environment_sets_the_mode_and_the_argument_wins(
    make_store: Callable[..., SQLiteMemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FACTLEDGER_SECRETS sets the mode of a store opened with none; `secrets=` wins."""
    monkeypatch.setenv("FACTLEDGER_SECRETS", "redact")
    assert "redact" == make_store().secrets
    assert "refuse" == make_store(secrets="refuse").secrets
    monkeypatch.setenv("FACTLEDGER_SECRETS", " ")
    assert "refuse" == make_store().secrets


def test_an_unknown_mode_is_a_clear_error(
    make_store: Callable[..., SQLiteMemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mode that is not refuse, redact or allow is refused, naming where it came from."""
    with pytest.raises(InvalidInputError, match="secrets must be one of refuse, redact, allow"):
        make_store(secrets="off")
    monkeypatch.setenv("FACTLEDGER_SECRETS", "Refuse")
    with pytest.raises(InvalidInputError, match="FACTLEDGER_SECRETS must be one of"):
        make_store()


def test_add_many_refuses_the_whole_batch_naming_the_row(
    make_store: Callable[..., SQLiteMemoryStore],
) -> None:
    """One secret in a batch refuses it all, naming the row."""
    store = make_store()
    rows = [
        {"type": "learning", "content": "fine"},
        {"type": "learning", "content": f"oops {GITHUB}"},
    ]
    with pytest.raises(SecretRefusedError, match=r"rows\[1\]: content holds a secret") as caught:
        store.add_many(rows)
    assert 5 == caught.value.offset
    assert [] == store.list(limit=1000)
    assert 2 == len(make_store(secrets="redact").add_many(rows))


def test_a_secret_in_a_tag_or_key_is_refused_even_under_redact(
    make_store: Callable[..., SQLiteMemoryStore],
) -> None:
    """A name cannot be redacted without making two names one, so a secret in a tag or a
    fact's key is refused under `redact` as under `refuse`, and allowed under `allow`."""
    for mode in ("refuse", "redact"):
        store = make_store(secrets=mode)
        with pytest.raises(SecretRefusedError, match=r"tags holds a secret \(github-token\)"):
            store.add("learning", "fine", [GITHUB])
        kb = CrossTaskKB(store)
        with pytest.raises(SecretRefusedError, match=r"^key holds a secret"):
            kb.publish("t", GITHUB, "v", scope="project")
        with pytest.raises(SecretRefusedError, match=r"^tag holds a secret"):
            kb.publish(GITHUB, "k", "v", scope="project")
        assert [] == store.list(limit=1000)
    allowed = make_store(secrets="allow")
    assert (GITHUB,) == tuple(entry_of(allowed, allowed.add("learning", "fine", [GITHUB])).tags)


def test_publish_refuses_and_redacts_a_value(
    make_store: Callable[..., SQLiteMemoryStore],
) -> None:
    """A fact's value is screened as memory content is, on publish and publish_many."""
    store = make_store()
    kb = CrossTaskKB(store, run_id="r1")
    with pytest.raises(SecretRefusedError, match=r"items\[1\]: value holds a secret"):
        kb.publish_many([("t", "a", "fine"), ("t", "b", SECRETS["slack-token"])], scope="run")
    assert [] == list(kb.subscribe("t", scope="run"))
    redacting = CrossTaskKB(make_store(secrets="redact"), run_id="r1")
    fact = redacting.publish("t", "b", f"use {SECRETS['stripe-key']}", scope="run")
    assert "use [REDACTED:stripe-key]" == fact.value


def test_redaction_that_would_pass_the_size_limit_is_refused(
    make_store: Callable[..., SQLiteMemoryStore],
) -> None:
    """Short secrets redacted to longer markers cannot push a text over the size limit."""
    url = "redis://:p@h "
    text = url * (MAX_CONTENT_BYTES // len(url))
    with pytest.raises(InvalidInputError, match="content with its secrets redacted is"):
        make_store(secrets="redact").add("learning", text)


def test_the_legacy_table_opened_as_a_store_is_refused_whole(db_path: Path) -> None:
    """Opening a file of the replaced store imports its rows; one secret refuses the whole
    import naming the row's id and offset (nothing is written), and `redact` imports it
    redacted."""
    rows = [
        (1, "learning", "fine", "", 1.0, None, 1700000000.0, "", "", None),
        (2, "learning", f"x {GITHUB}", "", 1.0, None, 1700000001.0, "", "", None),
    ]
    legacy_file(db_path, rows)
    with pytest.raises(
        SecretRefusedError, match=r"legacy memory row id=2: content .* at character 2"
    ):
        SQLiteMemoryStore(db_path)
    with closing(open_log(db_path, read_only=True)) as log, log.snapshot() as snap:
        assert 0 == snap.head().position
    with SQLiteMemoryStore(db_path, secrets="redact") as store:
        assert ["fine", "x [REDACTED:github-token]"] == sorted(
            e.content for e in store.list(limit=1000)
        )
    legacy = sqlite3.connect(db_path)
    assert 2 == legacy.execute("SELECT count(*) FROM memory").fetchone()[0]
    legacy.close()


def test_detectors_are_shared_safely_between_threads() -> None:
    """A scan keeps no state: many threads scanning at once find what one thread finds."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"{i} {value}" for i, value in enumerate(SECRETS.values())] * 20
    alone = [find_secrets(text) for text in texts]
    with ThreadPoolExecutor(8) as pool:
        assert alone == list(pool.map(find_secrets, texts))


def test_public_keys_pass_but_a_private_key_file_does_not(tmp_path: Path) -> None:
    """An operator's public key file passes; its private key file is a secret."""
    public = generate_key(tmp_path / "k", name="alice")
    assert [] == find_secrets(public.read_text(encoding="utf-8"))
    private = (tmp_path / "k").read_text(encoding="utf-8")
    assert ["factledger-private-key"] == [f.detector for f in find_secrets(private)]


PATHOLOGICAL = {
    "eyJ": (None, "eyJ"),
    "slashes": (None, "//"),
    "sk": (None, "sk-"),
    "private-key": ("private-key", "BEGIN RSA PRIVATE KEY "),
    "slack": (None, "xoxb-"),
    "url": (None, "://a:"),
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_a_huge_text_of_repeated_prefixes_is_scanned_whole(name: str) -> None:
    """A 1 MiB text repeating what starts a secret (an attack on the scan's time: the
    library's JWT, OpenAI and npm patterns and a naive private-key block were quadratic on
    these, hours per write) is read to its end, and found or passed as it should be."""
    detector, unit = PATHOLOGICAL[name]
    text = unit * (MAX_CONTENT_BYTES // len(unit))
    assert ([] if detector is None else [detector]) == [f.detector for f in find_secrets(text)]
