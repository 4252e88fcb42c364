"""The PostgreSQL log's schema, roles and agent bindings: the SQL that makes the database itself
refuse what the log forbids.

Six tables in one schema (`factledger` unless the session sets `factledger.schema`):

- `events`  the log: position, event id (unique, generated or not), stored bytes, chain value.
- `content` beside the log (format v2): each event's text and the salt keying its content
            hash, written in the append's transaction, for a position `events` holds.
- `erased`  the positions whose text an erasure removed, and the erasure's position.
- `head`    one row: the last position and its chain value. Writers lock it (`FOR UPDATE`)
            to append, so positions are given, and commit, one writer at a time.
- `meta`    the log id and format.
- `agents`  login roles bound to one adapter each.

Writers hold SELECT and EXECUTE on two functions, nothing else: `lock_head()` and
`append_events(...)`, which checks each row (size, JSON of a known kind with its fields, its
position and event id), computes its SHA-256 chain link and writes it with its content row.
Triggers refuse UPDATE, DELETE and TRUNCATE on `events`, `erased`, `meta` and `agents`, UPDATE
and TRUNCATE on `content`, and DELETE and TRUNCATE on `head`. After each INSERT into `events`,
one statement trigger refuses rows whose positions do not follow the head and moves the head;
`head` accepts an UPDATE only to the log's last row. A bound role (an agent login) is refused
an event that names another adapter (or none), an operator action (a kind outside
`eventlog.events.AGENT_KINDS`, or one holding an operator-only field: an import), whatever its
signature, and any event while the log holds no `operator_added` (found through a partial
index, so the check costs one probe). The kinds are written into the functions from the
payload types. Every function runs with a fixed `search_path`, so a session's own path cannot
redirect it.

Erasure: when `append_events` stores a `content_erased` event (whose positions must be JSON
integers as written, or the whole append is refused), it records in `erased` each earlier
position it names that holds a written text and deletes that text and salt from `content`, in
the same transaction. A `content` row may be deleted only for a position `erased` names, and
a row of `erased` must be named by a `content_erased` event in the chain, so even the owner
cannot remove a text without an erasure every host sees. The server cannot check Ed25519
signatures: its guard is the role (an agent login is refused the kind, so only a login no
adapter binds can append an erasure) and the kind. Whether an erasure takes effect is still
each host's to judge: a host's fold gives an unsigned or badly signed one no effect, and
`verify` then fails closed on the texts it removed (absent, with no erasure in force). The
deleted rows stay in the table's pages until `VACUUM FULL` rewrites it (`CONTENT_TABLE`).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import msgspec
import psycopg
from psycopg import sql

from eventlog.checks import check_actor
from eventlog.errors import InvalidInputError, InvalidTypeError, StorageError
from eventlog.events import (
    AGENT_KINDS,
    OPERATOR_FIELDS,
    OPERATOR_KINDS,
    PAYLOAD_TYPES,
    ContentErased,
    Envelope,
    OperatorAdded,
    kind_of,
)
from eventlog.formats import (
    CURRENT,
    MAX_ENVELOPE_BYTES,
    MAX_TEXT_BYTES,
    SALT_BYTES,
    LogFormat,
    format_named,
    marker,
)

DEFAULT_SCHEMA = "factledger"
DEFAULT_ROLE_PREFIX = "factledger"
FORMAT_PREFIX = "factledger-postgres-log"
"""The log's `format` in `meta` is this, `/` and the format's number."""

_V1_TABLES = ("meta", "events", "head", "agents")
CONTENT_TABLE = "{schema}.content"
"""The table holding the texts, as `render` qualifies it."""
REFUSED_EVENT = "FL001"
"""The SQLSTATE of an event the log refuses as malformed, too large or misplaced."""
LEGACY_FORMAT = "FL002"
"""The SQLSTATE of a write to a log of a format this version never writes (v1)."""

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_TABLES = (
    """CREATE TABLE {schema}.meta (
        name text PRIMARY KEY,
        value text NOT NULL
    )""",
    """CREATE TABLE {schema}.events (
        position bigint PRIMARY KEY CHECK (position > 0),
        event_id text NOT NULL UNIQUE,
        body bytea NOT NULL,
        chain_hash bytea NOT NULL
    )""",
    """CREATE TABLE {schema}.content (
        position bigint PRIMARY KEY REFERENCES {schema}.events (position),
        text bytea NOT NULL,
        salt bytea NOT NULL
    )""",
    """CREATE TABLE {schema}.head (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        position bigint NOT NULL,
        chain_hash bytea NOT NULL
    )""",
    """CREATE TABLE {schema}.agents (
        role name PRIMARY KEY,
        adapter text NOT NULL
    )""",
)

_REFUSE_CHANGE = """CREATE OR REPLACE FUNCTION {schema}.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$"""

_CHECK_HEAD = """CREATE OR REPLACE FUNCTION {schema}.check_head() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last_position bigint;
    last_hash bytea;
BEGIN
    SELECT position, chain_hash INTO last_position, last_hash
      FROM {schema}.events ORDER BY position DESC LIMIT 1;
    IF NEW.only_row IS DISTINCT FROM OLD.only_row
       OR NEW.position IS DISTINCT FROM last_position
       OR NEW.chain_hash IS DISTINCT FROM last_hash THEN
        RAISE EXCEPTION '%.head names only the last event of the log (position %)',
            TG_TABLE_SCHEMA, coalesce(last_position, 0)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$"""

_ENVELOPE = """CREATE OR REPLACE FUNCTION {schema}.envelope(body bytea) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT replace(convert_from(body, 'UTF8'), E'\\\\u0000', E'\\\\ufffd')::jsonb
$$"""
"""A row's envelope as the database reads it. jsonb holds no NUL, so an escaped NUL in a text
(which only a text can hold, and no field the triggers read) is read as U+FFFD."""

_IS_OPERATOR_ADDED = """CREATE OR REPLACE FUNCTION {schema}.is_operator_added(body bytea)
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT position({marker} IN body) > 0
       AND {schema}.envelope(body) -> 'payload' ->> 'kind' = {operator_added}
$$"""
"""Whether a row registers an operator key. Only rows whose bytes hold the kind as the log
writes it are parsed (a row spelling it otherwise only keeps agents waiting longer)."""

_AGENT_MAY_WRITE = """CREATE OR REPLACE FUNCTION {schema}.agent_may_write(payload jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(payload ->> 'kind' IN ({agent_kinds}), false){operator_fields}
$$"""
"""Whether an agent login may append an event with this payload: a kind agents write
(`eventlog.events.AGENT_KINDS`), setting none of its operator-only fields."""

_OPERATOR_INDEX = """CREATE INDEX operator_added ON {schema}.events (position)
    WHERE {schema}.is_operator_added(body)"""

_AFTER_APPEND = """CREATE OR REPLACE FUNCTION {schema}.after_append() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    head_position bigint;
    first_position bigint;
    last_position bigint;
    appended_rows bigint;
BEGIN
    SELECT min(position), max(position), count(*)
      INTO first_position, last_position, appended_rows FROM appended;
    IF appended_rows = 0 THEN
        RETURN NULL;
    END IF;
    SELECT position INTO head_position FROM {schema}.head FOR UPDATE;
    IF first_position <> head_position + 1
       OR last_position - first_position + 1 <> appended_rows THEN
        RAISE EXCEPTION 'positions % to % do not follow the head at %',
            first_position, last_position, head_position
            USING ERRCODE = 'check_violation';
    END IF;
    UPDATE {schema}.head SET position = last_position,
        chain_hash = (SELECT chain_hash FROM appended WHERE position = last_position);
    RETURN NULL;
END
$$"""
"""Keeps the head on the last row whoever inserts (only the owner can, outside
`append_events`): positions must follow it densely."""

_LOCK_HEAD = """CREATE OR REPLACE FUNCTION {schema}.lock_head()
RETURNS TABLE (head_position bigint, head_chain_hash bytea)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT h.position, h.chain_hash FROM {schema}.head h FOR UPDATE
$$"""
"""The head, locked for the caller's transaction: writers may lock it without any privilege
to change it."""

_APPEND_EVENTS = """CREATE OR REPLACE FUNCTION {schema}.append_events(
    event_ids text[], bodies bytea[], texts bytea[], salts bytea[]
) RETURNS bytea[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    total integer := coalesce(cardinality(event_ids), 0);
    bound text;
    agent boolean;
    head_position bigint;
    previous bytea;
    links bytea[] := '{{}}';
    envelopes jsonb[] := '{{}}';
    envelope jsonb;
    kind text;
    target bigint;
    named text;
    i integer := 0;
    erasures integer[] := '{{}}';
    erasure integer;
BEGIN
    IF coalesce(cardinality(bodies), 0) <> total OR coalesce(cardinality(texts), 0) <> total
       OR coalesce(cardinality(salts), 0) <> total THEN
        RAISE EXCEPTION 'append_events needs as many bodies, texts and salts as event ids'
            USING ERRCODE = {refused};
    END IF;
    SELECT h.position, h.chain_hash INTO head_position, previous FROM {schema}.head h FOR UPDATE;
    SELECT a.adapter INTO bound FROM {schema}.agents a WHERE a.role = session_user;
    agent := FOUND;
    BEGIN
        FOR n IN 1 .. total LOOP
            i := n;
            target := head_position + n;
            IF event_ids[n] IS NULL OR bodies[n] IS NULL OR texts[n] IS NULL
               OR salts[n] IS NULL THEN
                RAISE EXCEPTION 'the event at position % is refused: a one-dimensional array '
                    'holding no NULL is needed for each argument', target
                    USING ERRCODE = {refused};
            ELSIF octet_length(bodies[n]) > {max_body} THEN
                RAISE EXCEPTION 'the event at position % is refused: its body is % bytes; the '
                    'limit is {max_body}', target, octet_length(bodies[n])
                    USING ERRCODE = {refused};
            ELSIF octet_length(texts[n]) > {max_text} THEN
                RAISE EXCEPTION 'the event at position % is refused: its text is % bytes; the '
                    'limit is {max_text}', target, octet_length(texts[n])
                    USING ERRCODE = {refused};
            ELSIF octet_length(salts[n]) <> {salt_bytes} THEN
                RAISE EXCEPTION 'the event at position % is refused: its salt is % bytes, '
                    'not {salt_bytes}', target, octet_length(salts[n])
                    USING ERRCODE = {refused};
            END IF;
            envelopes[n] := {schema}.envelope(bodies[n]);
        END LOOP;
    EXCEPTION
        WHEN invalid_text_representation OR character_not_in_repertoire
             OR untranslatable_character OR invalid_parameter_value THEN
            RAISE EXCEPTION 'the event at position % is refused: its body is not UTF-8 JSON',
                head_position + i
                USING ERRCODE = {refused};
    END;
    FOR n IN 1 .. total LOOP
        target := head_position + n;
        envelope := envelopes[n];
        kind := envelope -> 'payload' ->> 'kind';
        named := left(to_jsonb(event_ids[n])::text, 200);
        IF jsonb_typeof(envelope) IS DISTINCT FROM 'object'
           OR jsonb_typeof(envelope -> 'payload') IS DISTINCT FROM 'object'
           OR NOT envelope ?& ARRAY[{envelope_fields}] THEN
            RAISE EXCEPTION 'event % at position % is refused: its body is not an event '
                'envelope (a JSON object with {envelope_names})', named, target
                USING ERRCODE = {refused};
        ELSIF jsonb_typeof(envelope -> 'position') IS DISTINCT FROM 'number'
              OR envelope ->> 'position' IS DISTINCT FROM target::text THEN
            RAISE EXCEPTION 'event % is refused: its body names position %, not %', named,
                left((envelope -> 'position')::text, 40), target
                USING ERRCODE = {refused};
        ELSIF jsonb_typeof(envelope -> 'event_id') IS DISTINCT FROM 'string'
              OR envelope ->> 'event_id' IS DISTINCT FROM event_ids[n] THEN
            RAISE EXCEPTION 'event % at position % is refused: its body names event id %',
                named, target, left((envelope -> 'event_id')::text, 200)
                USING ERRCODE = {refused};
        ELSIF {known} IS NOT TRUE THEN
            RAISE EXCEPTION 'event % at position % is refused: %', named, target,
                CASE WHEN {known} IS NULL
                     THEN 'kind ' || left(coalesce(to_jsonb(kind)::text, 'null'), 80)
                          || ' is none this log knows ({kinds})'
                     ELSE 'its payload lacks a field its kind ' || kind || ' needs' END
                USING ERRCODE = {refused};
        ELSIF agent AND envelope ->> 'source_adapter' IS DISTINCT FROM bound THEN
            RAISE EXCEPTION 'role % may append only events of adapter %, not of %',
                session_user, bound,
                coalesce('adapter ' || left(to_jsonb(envelope ->> 'source_adapter')::text, 80),
                         'no adapter')
                USING ERRCODE = 'insufficient_privilege';
        ELSIF agent AND NOT {schema}.agent_may_write(envelope -> 'payload') THEN
            RAISE EXCEPTION {refusal}, session_user, {refused_action}
                USING ERRCODE = 'insufficient_privilege';
        ELSIF kind = {erasure_kind} THEN
            IF {schema}.erased_positions(bodies[n]) IS NULL THEN
                RAISE EXCEPTION 'event % at position % is refused: a % event names its '
                    'positions as a JSON array of integers, not %', named, target, kind,
                    left((envelope -> 'payload' -> 'positions')::text, 80)
                    USING ERRCODE = {refused};
            END IF;
            erasures := erasures || n;
        END IF;
        previous := sha256('\\x02'::bytea || previous || sha256('\\x00'::bytea || bodies[n]));
        links[n] := previous;
    END LOOP;
    IF agent AND total > 0 AND NOT EXISTS (
        SELECT 1 FROM {schema}.events e WHERE {schema}.is_operator_added(e.body)) THEN
        RAISE EXCEPTION 'role % may not append yet: the log has no operator key (register '
            'one: factledger pg init --operator-key FILE, or factledger operator add)',
            session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO {schema}.events (position, event_id, body, chain_hash)
        SELECT head_position + given.n, given.id, given.body, given.link
          FROM unnest(event_ids, bodies, links) WITH ORDINALITY AS given (id, body, link, n);
    INSERT INTO {schema}.content (position, text, salt)
        SELECT head_position + given.n, given.text, given.salt
          FROM unnest(texts, salts) WITH ORDINALITY AS given (text, salt, n);
    FOREACH erasure IN ARRAY erasures LOOP
        INSERT INTO {schema}.erased (position, erasure_position)
            SELECT DISTINCT named_position, head_position + erasure
              FROM unnest({schema}.erased_positions(bodies[erasure])) AS named_position
              JOIN {schema}.events e ON e.position = named_position
             WHERE named_position < head_position + erasure
               AND {schema}.envelope(e.body) -> 'payload' ->> 'kind' IN ({text_kinds})
            ON CONFLICT (position) DO NOTHING;
    END LOOP;
    IF cardinality(erasures) > 0 THEN
        DELETE FROM {schema}.content c USING {schema}.erased r
         WHERE r.erasure_position > head_position AND c.position = r.position;
    END IF;
    RETURN links;
END
$$"""
"""The one way a writer appends (format v2): under the head lock, each event is checked (its
size, its body an envelope of a known kind with the fields the kind needs, naming the position
and event id it is stored under, and for an agent login its adapter and a kind agents write),
its chain link computed here with SHA-256, and the rows written with their texts; the new
chain values are returned for the client to compare with its own. An erasure among them (only
a login no adapter binds gets this far with one) records each earlier position it names that
holds a written text in `erased` and removes that text and salt, in the same transaction."""

_ERASED_POSITIONS = """CREATE OR REPLACE FUNCTION {schema}.erased_positions(body bytea)
RETURNS bigint[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN json_typeof(named.positions) = 'array' AND NOT EXISTS (
               SELECT 1 FROM json_array_elements(named.positions) AS p (value)
                WHERE json_typeof(p.value) <> 'number'
                   OR p.value::text !~ '^-?[0-9]{{1,18}}$')
           THEN ARRAY(SELECT p.value::text::bigint
                        FROM json_array_elements(named.positions) AS p (value))
           END
      FROM (SELECT replace(convert_from(body, 'UTF8'), E'\\\\u0000', E'\\\\ufffd')::json
                   -> 'payload' -> 'positions' AS positions) AS named
$$"""
"""The positions an erasure's body names, or NULL unless they are a JSON array of integers as
written (read as `json`, which keeps each number's spelling, so `1e2` or `3.0`, which a client
decodes as no integer, is refused rather than read as 100 or 3)."""

_ONLY_ERASED = """CREATE OR REPLACE FUNCTION {schema}.only_erased() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {schema}.erased r WHERE r.position = OLD.position) THEN
        RAISE EXCEPTION '%.%: only an erasure removes a text; no erasure names position %',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, OLD.position
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN OLD;
END
$$"""
"""Lets a text leave `content` only for a position recorded in `erased`."""

_CHECK_ERASED = """CREATE OR REPLACE FUNCTION {schema}.check_erased() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    stray bigint;
BEGIN
    SELECT given.erasure_position INTO stray
      FROM (SELECT erasure_position, array_agg(position) AS named
              FROM recorded GROUP BY erasure_position) AS given
      LEFT JOIN {schema}.events e ON e.position = given.erasure_position
     WHERE ({schema}.envelope(e.body) -> 'payload' ->> 'kind' = {erasure_kind}
            AND {schema}.erased_positions(e.body) @> given.named) IS NOT TRUE
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%.%: position % holds no % event naming every position recorded '
            'for it', TG_TABLE_SCHEMA, TG_TABLE_NAME, stray, {erasure_kind}
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$"""
"""Keeps `erased` to what the log's own erasure events name: a row added by hand (by the
owner, who alone may) must name a `content_erased` event in the chain, seen by every host and
judged by `verify`."""

_REFUSE_LEGACY_APPEND = """CREATE OR REPLACE FUNCTION {schema}.append_events(
    event_ids text[], bodies bytea[], texts bytea[], salts bytea[]
) RETURNS bytea[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%.events holds a format-v1 log, which is read, verified and exported but '
        'never written; copy it into a new log with `factledger migrate OLD NEW --key FILE`',
        {schema_name}
        USING ERRCODE = {legacy};
END
$$"""
"""A format-v1 log's only write path, once `pg init` has run on it: a refusal."""

_TRIGGERS = (
    """CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {schema}.events
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()""",
    """CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {schema}.meta
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()""",
    """CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {schema}.agents
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()""",
    """CREATE TRIGGER append_only BEFORE DELETE OR TRUNCATE ON {schema}.head
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()""",
    """CREATE TRIGGER follows_the_log BEFORE UPDATE ON {schema}.head
    FOR EACH ROW EXECUTE FUNCTION {schema}.check_head()""",
    """CREATE TRIGGER appended AFTER INSERT ON {schema}.events
    REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.after_append()""",
)

_ERASED_TABLE = """CREATE TABLE IF NOT EXISTS {schema}.erased (
    position bigint PRIMARY KEY REFERENCES {schema}.events (position),
    erasure_position bigint NOT NULL CHECK (erasure_position > position)
)"""
_ERASURE_TRIGGERS = (
    "DROP TRIGGER IF EXISTS append_only ON {schema}.content",
    """CREATE TRIGGER append_only BEFORE UPDATE OR TRUNCATE ON {schema}.content
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()""",
    "DROP TRIGGER IF EXISTS only_erased ON {schema}.content",
    """CREATE TRIGGER only_erased BEFORE DELETE ON {schema}.content
    FOR EACH ROW EXECUTE FUNCTION {schema}.only_erased()""",
    "DROP TRIGGER IF EXISTS append_only ON {schema}.erased",
    """CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {schema}.erased
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()""",
    "DROP TRIGGER IF EXISTS named_by_an_erasure ON {schema}.erased",
    """CREATE TRIGGER named_by_an_erasure AFTER INSERT ON {schema}.erased
    REFERENCING NEW TABLE AS recorded
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.check_erased()""",
)
"""What lets an erasure remove texts, made or remade by `create` and `upgrade` alike (a log
made before erasure existed gets them from `pg init`): the `erased` table, append-only and
checked against the erasures that name its rows, and `content`'s triggers, which refuse
UPDATE and TRUNCATE and let a row be deleted only where `erased` names its position."""

_RULES = (
    _ENVELOPE,
    _ERASED_POSITIONS,
    _ONLY_ERASED,
    _CHECK_ERASED,
    _IS_OPERATOR_ADDED,
    _AGENT_MAY_WRITE,
    _AFTER_APPEND,
    _LOCK_HEAD,
    _APPEND_EVENTS,
)
"""The functions holding the log's rules, written in from this version's payload types and
limits: created with the log, and replaced by `upgrade` (`pg init` on an existing log)."""
_APPEND = "append_events(text[], bytea[], bytea[], bytea[])"
_WRITE_PATH = ("lock_head()", _APPEND)
"""The functions a writer may call: the only way it changes the log."""
_FUNCTIONS = (
    "refuse_change()",
    "check_head()",
    "envelope(bytea)",
    "is_operator_added(bytea)",
    "agent_may_write(jsonb)",
    "after_append()",
    "erased_positions(bytea)",
    "only_erased()",
    "check_erased()",
    *_WRITE_PATH,
)

_SQL_CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"
_SQL_CREATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('factledger schema ' || %s))"
_SQL_HAS_LOG = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relname = 'events')"
)
_SQL_HAS_ERASED = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relname = 'erased')"
)
_SQL_META_INSERT = "INSERT INTO {schema}.meta (name, value) VALUES (%s, %s)"
_SQL_HEAD_INSERT = "INSERT INTO {schema}.head (position, chain_hash) VALUES (0, %s)"

_SQL_ROLE_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s)"
_SQL_CREATE_GROUP = "CREATE ROLE {role} NOLOGIN"
_SQL_REVOKE_FUNCTIONS = "REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {schema} FROM PUBLIC"
_SQL_FORMAT = "SELECT value FROM {schema}.meta WHERE name = 'format'"
_SQL_OWNERSHIP = (
    "ALTER SCHEMA {schema} OWNER TO {owner}",
    *(f"ALTER TABLE {{schema}}.{table} OWNER TO {{owner}}" for table in _V1_TABLES),
    f"ALTER FUNCTION {{schema}}.{_APPEND} OWNER TO {{owner}}",
)
_SQL_V2_OWNERSHIP = (
    "ALTER TABLE {schema}.content OWNER TO {owner}",
    "ALTER TABLE {schema}.erased OWNER TO {owner}",
    *(f"ALTER FUNCTION {{schema}}.{function} OWNER TO {{owner}}" for function in _FUNCTIONS),
)
_SQL_PRIVILEGES = (
    "REVOKE ALL ON SCHEMA {schema} FROM PUBLIC",
    "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM PUBLIC",
    _SQL_REVOKE_FUNCTIONS,
    "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {writer}, {reader}",
    "REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {schema} FROM {writer}, {reader}",
    "GRANT CONNECT ON DATABASE {database} TO {owner}, {writer}, {reader}",
    "GRANT USAGE ON SCHEMA {schema} TO {writer}, {reader}",
    "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {writer}, {reader}",
    f"GRANT EXECUTE ON FUNCTION {{schema}}.{_APPEND} TO {{writer}}",
)
_SQL_V2_PRIVILEGES = ("GRANT EXECUTE ON FUNCTION {schema}.lock_head() TO {writer}",)
_SQL_DATABASE = "SELECT current_database()"
_SQL_ADMINISTRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('factledger administration'))"
"""Taken first by every administration transaction: logs in several schemas of one database
share catalog rows (the database's ACL, the roles' memberships), and two sessions changing
one at once fail with "tuple concurrently updated"."""

_SQL_BINDING = "SELECT adapter FROM {schema}.agents WHERE role = %s"
_SQL_BIND = "INSERT INTO {schema}.agents (role, adapter) VALUES (%s, %s)"
_SQL_CREATE_AGENT = "CREATE ROLE {role} LOGIN IN ROLE {writer}"
_SQL_CREATE_AGENT_WITH_PASSWORD = "CREATE ROLE {role} LOGIN PASSWORD {password} IN ROLE {writer}"
_SQL_LOGIN_STATE = (
    "SELECT r.rolcanlogin, coalesce(array_agg(g.rolname) FILTER (WHERE g.rolname IS NOT NULL),"
    " '{}') FROM pg_catalog.pg_roles r"
    " LEFT JOIN pg_catalog.pg_auth_members m ON m.member = r.oid"
    " LEFT JOIN pg_catalog.pg_roles g ON g.oid = m.roleid"
    " WHERE r.rolname = %s GROUP BY r.rolcanlogin"
)
_SQL_NO_LOGIN = "ALTER ROLE {role} NOLOGIN PASSWORD NULL"
_SQL_REVOKE_GROUP = "REVOKE {group} FROM {role}"
_SQL_END_SESSIONS = (
    "SELECT count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(pid))"
    " FROM pg_catalog.pg_stat_activity WHERE usename = %s AND pid <> pg_catalog.pg_backend_pid()"
)
_SQL_AGENTS = (
    "SELECT a.role, a.adapter, r.oid IS NOT NULL, coalesce(r.rolcanlogin, false),"
    " EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m"
    " JOIN pg_catalog.pg_roles g ON g.oid = m.roleid"
    " WHERE m.member = r.oid AND g.rolname = %s)"
    " FROM {schema}.agents a LEFT JOIN pg_catalog.pg_roles r ON r.rolname = a.role"
    " ORDER BY a.role"
)
_SQL_META_ALL = "SELECT name, value FROM {schema}.meta"
_SQL_HEAD = "SELECT position, chain_hash FROM {schema}.head"


class AgentLogin(msgspec.Struct, frozen=True, kw_only=True):
    """An agent login of the log, as the database holds it."""

    role: str
    adapter: str
    """The one adapter its events may name (the binding stays when the agent is removed)."""
    state: str
    """`active` (it can connect and write), `removed` (no login, no writer role: pg
    remove-agent), `partial` (one of the two taken away by hand) or `dropped` (no such role)."""
    login: bool
    """Whether the role may log in."""
    writer: bool
    """Whether it is a member of the writer role (may append)."""


class GroupRole(msgspec.Struct, frozen=True, kw_only=True):
    """One of the log's three group roles, and whether it exists."""

    kind: str
    name: str
    exists: bool


class Setup(msgspec.Struct, frozen=True, kw_only=True):
    """How a PostgreSQL log is set up: its schema, head, group roles and agent logins."""

    schema: str
    log_id: str
    format: str
    head_position: int
    head_chain_hash: str
    roles: list[GroupRole]
    agents: list[AgentLogin]


class Roles(NamedTuple):
    """The three group roles `init_schema` creates (none of them can log in)."""

    owner: str
    writer: str
    reader: str


def check_name(what: str, value: object) -> str:
    """Check a schema or role name: lower-case ASCII letters, digits and `_`, at most 63."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{what} must be str, not {type(value).__name__}")
    if not _NAME.fullmatch(value) or value.startswith("pg_"):
        raise InvalidInputError(
            f"{what} {value!r} must be 1 to 63 lower-case ASCII letters, digits or '_', "
            "start with a letter or '_', and not start with 'pg_'"
        )
    return value


def roles(prefix: str) -> Roles:
    """The group roles named by `prefix`: `<prefix>_owner`, `<prefix>_writer`, `<prefix>_reader`."""
    check_name("role prefix", prefix)
    return Roles(*(check_name("role", f"{prefix}_{kind}") for kind in Roles._fields))


def render(template: str, schema: str, **names: str) -> str:
    """A statement with `{schema}` and any other `{name}` replaced by quoted identifiers."""
    identifiers: dict[str, Any] = {key: sql.Identifier(value) for key, value in names.items()}
    composed = sql.SQL(template).format(schema=sql.Identifier(schema), **identifiers)
    return composed.as_string(None)


def _kind_rule(template: str, schema: str) -> sql.Composed:
    """A function of the log's rules, its kinds and fields written in from the payload types
    (`eventlog.events`) and its limits from `eventlog.formats`: a kind added there is known
    here, and refused to agents unless agents write it."""
    operator_added = kind_of(OperatorAdded)
    in_payload = _operator_fields(sql.SQL("payload"))
    in_envelope = _operator_fields(sql.SQL("(envelope -> 'payload')"))
    actions = [*sorted(OPERATOR_KINDS), *(label for _, label in in_payload)]
    return sql.SQL(template).format(
        schema=sql.Identifier(schema),
        marker=sql.Literal(f'"kind":"{operator_added}"'.encode("ascii")),
        operator_added=sql.Literal(operator_added),
        agent_kinds=sql.SQL(", ").join(map(sql.Literal, sorted(AGENT_KINDS))),
        operator_fields=sql.SQL("").join(
            sql.SQL("\n       AND NOT ({test})").format(test=test) for test, _ in in_payload
        ),
        refusal=sql.Literal(
            "role % is an agent login: it may not append %; only operators write "
            + ", ".join(actions)
        ),
        refused_action=sql.SQL(
            "CASE {cases} ELSE coalesce({kind}, 'an unreadable event') END"
        ).format(
            cases=sql.SQL(" ").join(
                sql.SQL("WHEN {test} THEN {label}").format(test=test, label=sql.Literal(label))
                for test, label in in_envelope
            ),
            kind=sql.SQL("envelope -> 'payload' ->> 'kind'"),
        ),
        refused=sql.Literal(REFUSED_EVENT),
        erasure_kind=sql.Literal(kind_of(ContentErased)),
        text_kinds=sql.SQL(", ").join(map(sql.Literal, _TEXT_KINDS)),
        legacy=sql.Literal(LEGACY_FORMAT),
        schema_name=sql.Literal(schema),
        max_body=sql.Literal(MAX_ENVELOPE_BYTES),
        max_text=sql.Literal(MAX_TEXT_BYTES),
        salt_bytes=sql.Literal(SALT_BYTES),
        envelope_fields=sql.SQL(", ").join(map(sql.Literal, _ENVELOPE_FIELDS)),
        envelope_names=sql.SQL(", ".join(_ENVELOPE_FIELDS)),
        kinds=sql.SQL(", ".join(sorted(_REQUIRED_FIELDS))),
        known=sql.SQL("(CASE kind {cases} END)").format(
            cases=sql.SQL(" ").join(
                sql.SQL("WHEN {kind} THEN {test}").format(
                    kind=sql.Literal(kind),
                    test=sql.SQL("envelope -> 'payload' ?& ARRAY[{fields}]").format(
                        fields=sql.SQL(", ").join(map(sql.Literal, fields))
                    )
                    if fields
                    else sql.SQL("true"),
                )
                for kind, fields in sorted(_REQUIRED_FIELDS.items())
            )
        ),
    )


def _required(struct: type[msgspec.Struct]) -> tuple[str, ...]:
    """The names under which `struct` encodes the fields it cannot decode without."""
    return tuple(f.encode_name for f in msgspec.structs.fields(struct) if f.required)


_ENVELOPE_FIELDS = _required(Envelope)
_TEXT_KINDS = sorted(kind_of(t) for t in PAYLOAD_TYPES if t.text_field is not None)
"""The kinds whose events write a text (the only texts an erasure removes)."""
_REQUIRED_FIELDS = {kind_of(t): _required(t) for t in PAYLOAD_TYPES}
"""Per kind the log knows, the payload fields an event of it must hold."""


def _operator_fields(payload: sql.Composable) -> list[tuple[sql.Composed, str]]:
    """For each kind with operator-only fields (`OPERATOR_FIELDS`): a test that `payload` is
    of that kind and holds one of them, and how a refusal names such an event."""
    return [
        (
            sql.SQL("{payload} ->> 'kind' = {kind} AND {payload} ?| ARRAY[{fields}]").format(
                payload=payload,
                kind=sql.Literal(kind),
                fields=sql.SQL(", ").join(map(sql.Literal, fields)),
            ),
            f"{kind} with {' or '.join(fields)}",
        )
        for kind, fields in sorted(OPERATOR_FIELDS.items())
    ]


def has_log(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether `schema` holds a log (read from the catalog, whatever this role may read)."""
    row = conn.execute(_SQL_HAS_LOG, (schema,)).fetchone()
    return bool(row and row[0])


def has_erasure(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether the log in `schema` has the `erased` table (`pg init` of this version ran)."""
    row = conn.execute(_SQL_HAS_ERASED, (schema,)).fetchone()
    return bool(row and row[0])


def create(conn: psycopg.Connection[Any], schema: str, log_id: str, genesis: bytes) -> bool:
    """Create the log's schema in the caller's open transaction, unless another session
    created it first (creators are serialized by an advisory lock); return whether it did."""
    conn.execute(_SQL_CREATION_LOCK, (schema,))
    if has_log(conn, schema):
        return False
    conn.execute(render(_SQL_CREATE_SCHEMA, schema))
    for statement in (*_TABLES, _REFUSE_CHANGE, _CHECK_HEAD):
        conn.execute(render(statement, schema))
    _install_rules(conn, schema, CURRENT)
    for statement in (_OPERATOR_INDEX, *_TRIGGERS):
        conn.execute(render(statement, schema))
    _install_erasure(conn, schema)
    conn.execute(render(_SQL_META_INSERT, schema), ("log_id", log_id))
    conn.execute(render(_SQL_META_INSERT, schema), ("format", marker(FORMAT_PREFIX)))
    conn.execute(render(_SQL_HEAD_INSERT, schema), (genesis,))
    return True


def upgrade(conn: psycopg.Connection[Any], schema: str) -> LogFormat:
    """Replace an existing log's rules with this version's, in the caller's transaction, and
    return its format: a v2 log gets this version's kinds and limits, a v1 log a write path
    that refuses every append (it is read, never written)."""
    conn.execute(_SQL_CREATION_LOCK, (schema,))
    log_format = format_of(conn, schema)
    _install_rules(conn, schema, log_format)
    if log_format is CURRENT:
        _install_erasure(conn, schema)
    return log_format


def _install_erasure(conn: psycopg.Connection[Any], schema: str) -> None:
    """Create the `erased` table if absent, and make `content`'s and its triggers this
    version's (`_ERASURE_TRIGGERS`)."""
    for statement in (_ERASED_TABLE, *_ERASURE_TRIGGERS):
        conn.execute(render(statement, schema))


def format_of(conn: psycopg.Connection[Any], schema: str) -> LogFormat:
    """The format of the log in `schema` (`eventlog.formats`)."""
    row = conn.execute(render(_SQL_FORMAT, schema)).fetchone()
    return format_named(FORMAT_PREFIX, row[0] if row else None, f"schema {schema}")


def _install_rules(conn: psycopg.Connection[Any], schema: str, log_format: LogFormat) -> None:
    """Create or replace the functions holding the rules of a log of `log_format`, callable
    by nobody until `grant`."""
    rules = _RULES if log_format is CURRENT else (_REFUSE_LEGACY_APPEND,)
    for rule in rules:
        conn.execute(_kind_rule(rule, schema))
    conn.execute(render(_SQL_REVOKE_FUNCTIONS, schema))


def serialize_administration(conn: psycopg.Connection[Any]) -> None:
    """Wait, inside the current transaction, until no other session of this database is
    setting up or binding a factledger log."""
    conn.execute(_SQL_ADMINISTRATION_LOCK)


def create_group_roles(conn: psycopg.Connection[Any], names: Roles) -> None:
    """Create each group role that does not exist yet."""
    for name in names:
        if not _role_exists(conn, name):
            conn.execute(render(_SQL_CREATE_GROUP, "", role=name))


def grant(conn: psycopg.Connection[Any], schema: str, names: Roles) -> None:
    """Give the schema and its functions to the owner role; writer and reader may SELECT,
    the writer may call the write path (`lock_head`, `append_events`) and nothing else;
    PUBLIC nothing."""
    row = conn.execute(_SQL_DATABASE).fetchone()
    database = str(row[0]) if row else ""
    statements = [*_SQL_OWNERSHIP, *_SQL_PRIVILEGES]
    if format_of(conn, schema) is CURRENT:
        statements += [*_SQL_V2_OWNERSHIP, *_SQL_V2_PRIVILEGES]
    for statement in statements:
        conn.execute(render(statement, schema, database=database, **names._asdict()))


def bind_agent(
    conn: psycopg.Connection[Any],
    schema: str,
    role: str,
    adapter: str,
    names: Roles,
    password: str | None,
) -> None:
    """Create the login role `role`, a member of the writer role, bound to `adapter`."""
    check_name("role", role)
    check_actor("adapter", adapter)
    if not has_log(conn, schema):
        raise StorageError(f"schema {schema} holds no factledger log: run init_schema first")
    if not _role_exists(conn, names.writer):
        raise StorageError(f"role {names.writer} does not exist: run init_schema first")
    row = conn.execute(render(_SQL_BINDING, schema), (role,)).fetchone()
    if row is not None and row[0] != adapter:
        raise InvalidInputError(
            f"role {role} is bound to adapter {row[0]!r}; a binding is never changed"
        )
    state = _login_state(conn, role)
    if state is not None:
        if row is None:
            raise InvalidInputError(
                f"role {role} already exists and is not an agent of this log; "
                "choose a new name for the agent"
            )
        if not state[0]:
            raise InvalidInputError(
                f"role {role} was removed (pg remove-agent) and is never restored; "
                "choose a new name for the agent"
            )
        return
    if password is None:
        conn.execute(render(_SQL_CREATE_AGENT, schema, role=role, writer=names.writer))
    else:
        statement = sql.SQL(_SQL_CREATE_AGENT_WITH_PASSWORD).format(
            role=sql.Identifier(role),
            writer=sql.Identifier(names.writer),
            password=sql.Literal(password),
        )
        conn.execute(statement)
    if row is None:
        conn.execute(render(_SQL_BIND, schema), (role, adapter))


def _role_exists(conn: psycopg.Connection[Any], name: str) -> bool:
    row = conn.execute(_SQL_ROLE_EXISTS, (name,)).fetchone()
    return bool(row and row[0])


def unbind_agent(conn: psycopg.Connection[Any], schema: str, role: str, names: Roles) -> str:
    """Take away agent login `role`'s login, password and group roles, in the caller's open
    transaction; its binding and every event it wrote stay. Return its adapter."""
    check_name("role", role)
    if not has_log(conn, schema):
        raise StorageError(f"schema {schema} holds no factledger log")
    row = conn.execute(render(_SQL_BINDING, schema), (role,)).fetchone()
    state = _login_state(conn, role)
    if row is None:
        what = "no role of that name exists" if state is None else "it is no agent login"
        raise InvalidInputError(
            f"role {role} is not an agent of the log in schema {schema} ({what}): "
            "pg remove-agent removes only logins made by pg add-agent"
        )
    adapter = str(row[0])
    if state is None:
        raise InvalidInputError(
            f"role {role} (adapter {adapter}) no longer exists: it cannot connect; "
            "nothing to remove"
        )
    login, groups = state
    held = [name for name in names if name in groups]
    if not login and not held:
        raise InvalidInputError(
            f"role {role} (adapter {adapter}) was already removed: it cannot log in or write"
        )
    conn.execute(render(_SQL_NO_LOGIN, schema, role=role))
    for group in held:
        conn.execute(render(_SQL_REVOKE_GROUP, schema, group=group, role=role))
    return adapter


def end_sessions(conn: psycopg.Connection[Any], role: str) -> int:
    """End every open session of `role`; return how many were ended."""
    row = conn.execute(_SQL_END_SESSIONS, (role,)).fetchone()
    return int(row[0]) if row else 0


def setup(conn: psycopg.Connection[Any], schema: str, names: Roles) -> Setup:
    """The log in `schema` as the catalog and its tables describe it."""
    if not has_log(conn, schema):
        raise StorageError(f"schema {schema} holds no factledger log (run pg init)")
    meta = dict(conn.execute(render(_SQL_META_ALL, schema)).fetchall())
    head = conn.execute(render(_SQL_HEAD, schema)).fetchone()
    assert head is not None
    agents = conn.execute(render(_SQL_AGENTS, schema), (names.writer,)).fetchall()
    return Setup(
        schema=schema,
        log_id=str(meta.get("log_id", "")),
        format=str(meta.get("format", "")),
        head_position=int(head[0]),
        head_chain_hash=bytes(head[1]).hex(),
        roles=[
            GroupRole(kind=kind, name=name, exists=_role_exists(conn, name))
            for kind, name in names._asdict().items()
        ],
        agents=[
            AgentLogin(role=r, adapter=a, state=_state(e, lg, w), login=lg, writer=w)
            for r, a, e, lg, w in agents
        ],
    )


def _state(exists: bool, login: bool, writer: bool) -> str:
    if not exists:
        return "dropped"
    if login and writer:
        return "active"
    return "partial" if login or writer else "removed"


def _login_state(conn: psycopg.Connection[Any], role: str) -> tuple[bool, list[str]] | None:
    """Whether `role` may log in and the roles it is a member of; None if it does not exist."""
    row = conn.execute(_SQL_LOGIN_STATE, (role,)).fetchone()
    return None if row is None else (bool(row[0]), list(row[1]))
