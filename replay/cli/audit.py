"""Audit: verify, checkpoint, keygen, prove, rebuild, snapshot."""

from __future__ import annotations

from pathlib import Path

import click

from eventlog import StorageError
from projections.internal import SNAPSHOT_EVERY, SNAPSHOT_KEEP
from replay.checkpoints import Checkpoint
from replay.cli import output
from replay.cli.app import EXIT_ERROR, EXIT_OK, EXIT_TAMPERED, Session, app, fail
from replay.cli.files import read_text, replacing
from replay.cli.params import ENTRY_ID
from replay.keys import generate_key, read_operator_key
from replay.proofs import verify_inclusion
from replay.shortcuts import verify

out_path = click.Path(dir_okay=False, path_type=Path)
MAX_CHECKPOINT_BYTES = 64 * 1024
"""A checkpoint file is a few lines; anything larger is not one."""


def read_checkpoint(path: str) -> Checkpoint:
    """The checkpoint in the file at `path`, or one clear error."""
    return Checkpoint.parse(read_text(path, "checkpoint", max_bytes=MAX_CHECKPOINT_BYTES))


@app.command("verify")
@click.option(
    "--checkpoint", "taken", metavar="FILE", help="a checkpoint file taken earlier ('-': stdin)"
)
@click.option(
    "--pub",
    metavar="FILE",
    help="an operator's public key file: check the checkpoint's signature by it first",
)
@click.option(
    "--deep",
    is_flag=True,
    help="also compare every projection in the file with the log refolded, row by row (exit 2 "
    "for any it could not compare)",
)
@click.option(
    "--previous",
    metavar="OLD",
    help="the format-v1 log file this log was migrated from: exit 2 unless the log's "
    "migration statement names OLD's id, size and head chain value and copies its events",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    metavar="N",
    help="processes walking a SQLite log of 200,000 events or more (default: one per core, "
    "at most 4; 1: one process); the verdict is the same",
)
@click.pass_obj
def verify_(
    session: Session,
    taken: str | None,
    pub: str | None,
    deep: bool,
    previous: str | None,
    workers: int | None,
) -> int:
    """Re-hash the whole log (exit 0 ok, 1 bad input, no log or an empty one, 2 tampering).

    Exit 2 means something shows tampering: a row that fails, a read model that folded past
    the log or at another chain value (or whose checkpoints were removed), a file holding
    factledger tables without its log or its log's id, and with --checkpoint a log that no
    longer extends it (or no log at all). With --deep, also any projection row that differs
    from the log refolded, named by table and row, and any projection it could not compare,
    named with its tables. With --pub, first check the checkpoint's signature by that
    public key (exit 2 if it does not verify; an unsigned checkpoint is reported as
    unsigned, exit 1).
    """
    held = read_checkpoint(taken) if taken is not None else None
    if pub is not None:
        if held is None:
            raise click.UsageError("--pub checks a checkpoint's signature: give --checkpoint too")
        if not held.verify_signature(pub):
            return fail(
                f"the checkpoint carries no valid signature by the key in {pub}",
                code=EXIT_TAMPERED,
            )
    db = session.log_dsn() or (session.db if held is not None else session.existing_db())
    with output.progress("verified") as progress:
        report = verify(
            db,
            checkpoint=held,
            progress=progress,
            deep=deep,
            phase=progress.phase,
            previous=previous,
            workers=workers,
        )
    session.emit(report)
    if not report.ok:
        return EXIT_TAMPERED
    return EXIT_ERROR if report.checked == 0 else EXIT_OK


@app.command("checkpoint")
@click.option(
    "--key",
    metavar="FILE",
    help="operator private key file to sign the checkpoint (default: $FACTLEDGER_OPERATOR_KEY)",
)
@click.option("--out", type=out_path, help="also write the checkpoint to this file")
@click.option(
    "--snapshot",
    is_flag=True,
    help="also write a snapshot of the read model at the log's head (opens it for writing)",
)
@click.pass_obj
def checkpoint_(session: Session, key: str | None, out: Path | None, snapshot: bool) -> int:
    """Take a checkpoint to keep outside the database (a signed note with --key)."""
    signer = session.operator_key(key)
    with (
        session.ledger(read_only=not snapshot) as ledger,
        output.progress("checkpoint: verified") as progress,
    ):
        taken = ledger.checkpoint(key=signer, snapshot=snapshot or None, progress=progress)
    if out is not None:
        with replacing(out) as stream:
            stream.write(str(taken))
    session.emit(taken, str(taken).rstrip("\n"))
    return EXIT_OK


@app.command("keygen")
@click.argument("path", metavar="FILE")
@click.option("--name", help="the key's name (default: FILE's name without its suffix)")
@click.pass_obj
def keygen(session: Session, path: str, name: str | None) -> int:
    """Create an Ed25519 operator key pair: FILE (private, mode 0600) and FILE.pub.

    Never overwrites a file. Register the public key with `factledger operator add`.
    """
    public = generate_key(path, name=name)
    key = read_operator_key(path)
    session.emit(
        {"key": path, "public_key": str(public), "key_id": key.key_id, "name": key.name},
        f"wrote the private key {path} (mode 0600; keep it secret) and the public key "
        f"{public}: {key.public.verifier_key}",
    )
    return EXIT_OK


@app.command("prove")
@click.argument("position", type=ENTRY_ID)
@click.option(
    "--checkpoint", "taken", metavar="FILE", required=True, help="a checkpoint file ('-': stdin)"
)
@click.pass_obj
def prove(session: Session, position: int, taken: str) -> int:
    """Prove that an event is in the log a checkpoint describes."""
    held = read_checkpoint(taken)
    with session.ledger() as ledger:
        proof = ledger.prove_inclusion(position, held)
    if not verify_inclusion(proof, proof.leaf_hash, held):
        raise StorageError(f"the proof for position {position} does not verify")
    session.emit(proof)
    return EXIT_OK


@app.command("rebuild")
@click.option("--swap", is_flag=True, help="replace the live tables with the rebuild")
@click.pass_obj
def rebuild_(session: Session, swap: bool) -> int:
    """Refold every projection from the log and compare (exit 2 on a mismatch), or --swap."""
    with session.ledger(read_only=not swap) as ledger, output.progress("rebuilt") as progress:
        report = ledger.rebuild(swap=swap, progress=progress)
    session.emit(report)
    return EXIT_OK if report.matches or swap else EXIT_TAMPERED


@app.command("snapshot")
@click.option(
    "--every",
    type=click.IntRange(min=1),
    default=SNAPSHOT_EVERY,
    show_default=True,
    help="events between snapshots: a past state folds at most this many",
)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=SNAPSHOT_KEEP,
    show_default=True,
    help="keep the newest this many snapshots (each holds the whole read model)",
)
@click.option(
    "--check",
    is_flag=True,
    help="write nothing: hold every snapshot to the log refolded (exit 2 if one differs)",
)
@click.pass_obj
def snapshot_(session: Session, every: int, keep: int, check: bool) -> int:
    """Write the missing snapshots of the read model (beside the database, in DB.snapshots/)
    at the newest --keep multiples of --every, folding once from the newest usable one, and
    remove older ones; as-of, diff and history --at then fold from the nearest.

    Snapshots are disposable (deleting them loses nothing) and enable one more at each
    `checkpoint` of a ledger opened for writing. With --check, compare each with the log
    refolded up to its position instead: exit 2 when a usable snapshot differs.
    """
    if check:
        with session.ledger() as ledger, output.progress("refolded") as progress:
            checks = ledger.check_snapshots(progress=progress)
        session.emit(checks)
        return EXIT_TAMPERED if any(c.usable and not c.matches for c in checks) else EXIT_OK
    with session.ledger(read_only=False) as ledger, output.progress("folded") as progress:
        taken = ledger.snapshot(every=every, keep=keep, progress=progress)
    session.emit(taken)
    return EXIT_OK
