"""Secrets stopped at the door: find credentials in text a write would record.

Where the detectors come from:

- detect-secrets (Yelp, 1.5.0), its plugin classes used directly (their compiled `denylist`
  patterns, `JwtTokenDetector.is_formally_valid`, and `Base64HighEntropyString`'s Shannon
  entropy), never its scan machinery or global settings: AWS access keys, GitHub, GitLab,
  Slack, Stripe live keys, private key blocks, passwords in URLs (`scheme://user:password@`),
  Azure storage, Discord, PyPI, SendGrid, Square, Twilio and Telegram tokens; JWTs (its
  check, its pattern anchored where a token starts) and OpenAI (legacy `T3BlbkFJ`) keys and
  npm tokens (its patterns made linear, below). Left out: its keyword, IBM, Cloudant,
  SoftLayer and Artifactory plugins, which match assignments and short prefixes ordinary
  text holds, Mailchimp's, the costliest pattern per scan, and its hex entropy plugin.
- Ours, where detect-secrets has no pattern: Anthropic (`sk-ant-`), OpenAI project, service
  and admin keys (`sk-proj-`, `sk-svcacct-`, `sk-admin-`), GitHub fine-grained tokens
  (`github_pat_`), Slack app tokens (`xapp-`), Stripe test keys, Google API keys (`AIza`),
  passwords in URLs with no user (`://:password@`) or in the query (`?password=`,
  `&token=`, ...), and factledger's own operator private key (`PRIVATE+KEY+...`).
- High-entropy tokens: a run of 20 or more base64 or URL-safe characters that holds a digit
  and a letter and whose Shannon entropy (detect-secrets' calculation) is above 4.5 bits per
  character, detect-secrets' default for base64. Runs of hex digits (and dashes) pass: the
  product's content hashes, chain values, Merkle roots, key ids, UUIDs and git SHAs are hex,
  so a hex secret with no known prefix is not caught. So do the base64 the product prints:
  an operator's public key (`<name>+<key id>+<base64>`), a checkpoint's root (the line after
  its tree size) and a signed note's signature lines (`— <name> <base64>`).

The patterns are compiled once, on first use (importing detect-secrets costs a tenth of a
second), and only read after: a scan keeps no state, so threads and stores share them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from eventlog.errors import InvalidInputError, InvalidTypeError
from projections import _environment as environment
from projections._errors import SecretRefusedError
from projections._needles import Search, merged, needles, present
from projections._visible import hidden_characters

SecretsMode = Literal["refuse", "redact", "allow"]
SECRETS_MODES: tuple[SecretsMode, ...] = ("refuse", "redact", "allow")
ENTROPY_LIMIT = 4.5
"""Bits per character above which a run of base64 characters is taken for a secret."""
ENTROPY = "high-entropy-string"
MIN_RUN = 20
"""The shortest run of base64 characters the entropy check reads."""

_RUN = re.compile(rf"[A-Za-z0-9+/=_-]{{{MIN_RUN},}}")
_HEX = re.compile(r"[0-9a-fA-F-]+")
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
_PRODUCT_BASE64 = (
    re.compile(r"(?<![A-Za-z0-9+/=])[^\s+]+\+[0-9a-f]{8}\+A[A-Za-z0-9+/]{43}(?![A-Za-z0-9+/=])"),
    re.compile(r"^[0-9]+\n([A-Za-z0-9+/]{43}=)$", re.MULTILINE),
    re.compile(r"^\u2014 \S+ ([A-Za-z0-9+/]{40,}={0,2})$", re.MULTILINE),
)
"""Public base64 the product prints: a verifier key, a checkpoint root, a note signature."""
_JWT_SIGNATURE = re.compile(r"[A-Za-z0-9_+/=-]*")
"""What follows detect-secrets' JWT match, whose signature part matches lazily (empty)."""
_ASCII_HIDDEN = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")
"""The ASCII characters `projections._visible.hidden_characters` finds: controls that are
not whitespace."""
_PRIVATE_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret found in a text: which detector, and where (character offsets)."""

    detector: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Pattern:
    detector: str
    regex: re.Pattern[str]
    valid: Callable[[str], bool] | None = None
    needles: Search | None = None
    """Substrings of which every match holds one (`projections._needles`): an ASCII text
    holding none of them is not searched."""


def find_secrets(text: str) -> list[Finding]:
    """Every secret in `text`, in order. Findings that overlap or touch are one, named by
    its first pattern detector; a high-entropy run is reported only where no pattern
    detector found anything in it. Invisible characters other than whitespace
    (`projections._visible`) are read as absent, so one cannot split a secret; a finding
    spans the whole stretch of `text` it came from."""
    if text.isascii():
        hidden = {match.start() for match in _ASCII_HIDDEN.finditer(text)}
    else:
        hidden = set(hidden_characters(text))
    if not hidden:
        return _found(text)
    kept = [i for i in range(len(text)) if i not in hidden]
    reading = "".join(text[i] for i in kept)
    return [
        Finding(finding.detector, kept[finding.start], kept[finding.end - 1] + 1)
        for finding in _found(reading)
    ]


def _found(text: str) -> list[Finding]:
    patterns = _patterns()
    if text.isascii():
        held = present(_needles(), text)
        patterns = tuple(p for p in patterns if p.needles is None or p.needles.may_match(held))
    named = [
        finding
        for pattern in patterns
        if pattern.regex.search(text) is not None
        for finding in _matches(pattern, text)
    ]
    found = named + [
        run
        for run in _high_entropy(text)
        if not any(run.start < other.end and other.start < run.end for other in named)
    ]
    found.sort(key=lambda finding: finding.start)
    merged: list[Finding] = []
    for finding in found:
        if merged and finding.start <= merged[-1].end:
            last = merged[-1]
            detector = last.detector if last.detector != ENTROPY else finding.detector
            merged[-1] = Finding(detector, last.start, max(last.end, finding.end))
        else:
            merged.append(finding)
    return merged


def redacted(text: str, findings: list[Finding]) -> str:
    """`text` with each finding replaced by `[REDACTED:<detector>]`."""
    parts = []
    at = 0
    for finding in findings:
        parts.append(text[at : finding.start])
        parts.append(f"[REDACTED:{finding.detector}]")
        at = finding.end
    parts.append(text[at:])
    return "".join(parts)


def check_secrets_mode(value: object, *, name: str = "secrets") -> SecretsMode:
    """A secrets mode: 'refuse', 'redact' or 'allow'."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be str, not {type(value).__name__}")
    if value not in SECRETS_MODES:
        raise InvalidInputError(f"{name} must be one of {', '.join(SECRETS_MODES)}, got {value!r}")
    return value


def chosen_mode(value: object | None) -> SecretsMode:
    """The secrets mode a write uses: `value` if given, else FACTLEDGER_SECRETS's (default
    'refuse'); either is checked."""
    if value is None:
        return check_secrets_mode(environment.secrets(), name=environment.SECRETS.source())
    return check_secrets_mode(value)


def screened(field: str, text: str, mode: SecretsMode) -> str:
    """`text` as a write in `mode` records it: as it is when it holds no secret or `mode`
    is 'allow'; under 'redact' with each secret replaced (`redacted`); under 'refuse' a
    `SecretRefusedError` naming the first secret's detector and offset."""
    if mode == "allow":
        return text
    findings = find_secrets(text)
    if not findings:
        return text
    if mode == "refuse":
        first = findings[0]
        raise SecretRefusedError(field, detector=first.detector, offset=first.start)
    return redacted(text, findings)


def check_name(field: str, value: str, mode: SecretsMode) -> str:
    """A name (a tag, a fact's key) a write records, refused (`SecretRefusedError`) when it
    holds a secret, unless `mode` is 'allow': redacting a name would make two names one."""
    if mode != "allow":
        finding = _name_secret(value)
        if finding is not None:
            raise SecretRefusedError(
                field, detector=finding.detector, offset=finding.start, name=True
            )
    return value


@functools.lru_cache(maxsize=8192)
def _name_secret(value: str) -> Finding | None:
    """The first secret in a name, if any. Remembered: writes repeat the same names."""
    return next(iter(find_secrets(value)), None)


def _matches(pattern: _Pattern, text: str) -> Iterator[Finding]:
    covered = 0
    for match in pattern.regex.finditer(text):
        group = 1 if pattern.detector in ("password-in-url", "npm-token") else 0
        start, end = match.span(group)
        if start < covered or (pattern.valid is not None and not pattern.valid(match.group())):
            continue
        if pattern.detector == "private-key":
            start, end = _key_block(text, start, end)
        elif pattern.detector == "jwt":
            tail = _JWT_SIGNATURE.match(text, end)
            end = end if tail is None else tail.end()
        covered = end
        yield Finding(pattern.detector, start, end)


def _key_block(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of a private key block whose BEGIN marker is at `start`: from its dashes to
    its END line, or to the end of the text when it has none."""
    while start and text[start - 1] == "-":
        start -= 1
    last = _PRIVATE_KEY_END.search(text, end)
    return start, len(text) if last is None else last.end()


def _high_entropy(text: str) -> Iterator[Finding]:
    public: list[tuple[int, int]] | None = None
    entropy = _entropy()
    for match in _RUN.finditer(text):
        run = match.group()
        if _HEX.fullmatch(run) or not _DIGIT.search(run) or not _LETTER.search(run):
            continue
        if entropy(run) <= ENTROPY_LIMIT:
            continue
        if public is None:
            public = [m.span(m.lastindex or 0) for r in _PRODUCT_BASE64 for m in r.finditer(text)]
        start, end = match.span()
        if not any(a <= start and end <= b for a, b in public):
            yield Finding(ENTROPY, start, end)


@functools.cache
def _entropy() -> Callable[[str], float]:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString(limit=ENTROPY_LIMIT).calculate_shannon_entropy


@functools.cache
def _needles() -> Search:
    """Every pattern's needles, merged: each is looked for once per text."""
    return merged(p.needles for p in _patterns() if p.needles is not None)


@functools.cache
def _patterns() -> tuple[_Pattern, ...]:
    """Every pattern detector, detect-secrets' first: compiled on first use."""
    from detect_secrets.plugins import (
        aws,
        azure_storage_key,
        basic_auth,
        discord,
        github_token,
        gitlab_token,
        jwt,
        private_key,
        pypi_token,
        sendgrid,
        slack,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )
    from detect_secrets.plugins.base import RegexBasedDetector

    library: dict[str, Callable[[], RegexBasedDetector]] = {
        "aws-access-key": aws.AWSKeyDetector,
        "github-token": github_token.GitHubTokenDetector,
        "gitlab-token": gitlab_token.GitLabTokenDetector,
        "slack-token": slack.SlackDetector,
        "stripe-key": stripe.StripeDetector,
        "private-key": private_key.PrivateKeyDetector,
        "password-in-url": basic_auth.BasicAuthDetector,
        "azure-storage-key": azure_storage_key.AzureStorageKeyDetector,
        "discord-token": discord.DiscordBotTokenDetector,
        "pypi-token": pypi_token.PypiTokenDetector,
        "sendgrid-key": sendgrid.SendGridDetector,
        "square-secret": square_oauth.SquareOAuthDetector,
        "telegram-token": telegram_token.TelegramBotTokenDetector,
        "twilio-key": twilio.TwilioKeyDetector,
    }
    found: list[tuple[str, re.Pattern[str], Callable[[str], bool] | None]] = [
        (name, regex, None)
        for name, plugin in library.items()
        for regex in _joined(list(plugin().denylist))
    ]
    found.append(("jwt", re.compile(_JWT), jwt.JwtTokenDetector.is_formally_valid))
    found.extend((name, re.compile(source), None) for name, source in _OURS)
    return tuple(_Pattern(name, regex, valid, needles(regex)) for name, regex, valid in found)


def _joined(regexes: list[re.Pattern[str]]) -> list[re.Pattern[str]]:
    """`regexes` as one pattern matching what any of them matches (one search instead of
    several: a scan costs mostly per search), each keeping its case-insensitivity; a pattern
    with other flags stays apart."""
    apart = [regex for regex in regexes if regex.flags & ~(re.IGNORECASE | re.UNICODE)]
    plain = [regex for regex in regexes if regex not in apart]
    if len(plain) < 2:
        return regexes
    joined = "|".join(
        f"(?i:{regex.pattern})" if regex.flags & re.IGNORECASE else f"(?:{regex.pattern})"
        for regex in plain
    )
    return [re.compile(joined), *apart]


_JWT = r"(?<![A-Za-z0-9_=-])eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+\.?[A-Za-z0-9_.+/=-]*?"
"""detect-secrets' JWT pattern, starting only where a token starts: its own pattern scans a
text of repeated `eyJ` in quadratic time."""
_OURS = (
    ("openai-key", r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"),
    ("npm-token", r"_authToken=\s*([A-Za-z0-9_-]{20,})"),
    ("anthropic-key", r"sk-ant-[a-z]+[0-9]*-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    ("github-token", r"github_pat_[A-Za-z0-9_]{22,}"),
    ("slack-token", r"xapp-[0-9]+-[A-Za-z0-9-]{20,}"),
    ("stripe-key", r"(?:sk|rk)_test_[0-9a-zA-Z]{24,}"),
    ("google-api-key", r"AIza[0-9A-Za-z_-]{35}"),
    ("password-in-url", r"://:([^\s/?#@$<{][^\s/?#@]*)@"),
    (
        "password-in-url",
        r"(?i)[?&](?:password|passwd|pwd|pass|secret|token|access_token|api_key|apikey)"
        r"=([^&#\s$<{][^&#\s]*)",
    ),
    ("factledger-private-key", r"PRIVATE\+KEY\+[^\s+]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]{40,}={0,2}"),
)
"""(detector, pattern) for what detect-secrets has no pattern for (a password in a URL that
starts with `$`, `<` or `{` is a placeholder: `$TOKEN`, `<password>`, `{{token}}`), and
detect-secrets' OpenAI and npm patterns made linear (theirs scan repeated `sk-` or `//` in
quadratic time: an agent could stall its own write for hours with a 1 MiB text)."""
