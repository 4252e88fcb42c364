"""Audit: verify, checkpoint, keygen, prove, rebuild."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from eventlog import StorageError
from replay.audit import verify
from replay.checkpoints import Checkpoint, checkpoint, generate_key, load_key
from replay.cli import output
from replay.cli.app import EXIT_ERROR, EXIT_OK, EXIT_TAMPERED, Session, app, fail
from replay.proofs import prove_inclusion, verify_inclusion
from replay.rebuild import rebuild

checkpoint_file = click.File("r", encoding="utf-8")
out_path = click.Path(dir_okay=False, path_type=Path)


@app.command("verify")
@click.option("--checkpoint", "taken", type=checkpoint_file, help="a checkpoint file taken earlier")
@click.option("--key", help="operator key file: check the checkpoint's MAC first")
@click.pass_obj
def verify_(session: Session, taken: TextIO | None, key: str | None) -> int:
    """Re-hash the whole log (exit 0 ok, 1 empty log or bad input, 2 tampering found)."""
    held = Checkpoint.parse(taken.read()) if taken is not None else None
    if key is not None:
        if held is None:
            raise click.UsageError("--key checks a checkpoint's MAC: give --checkpoint too")
        if not held.verify_mac(load_key(key)):
            return fail(f"the checkpoint's MAC does not verify with {key}", code=EXIT_TAMPERED)
    with output.progress("verified") as progress:
        report = verify(session.existing_db(), checkpoint=held, progress=progress)
    session.emit(report)
    if not report.ok:
        return EXIT_TAMPERED
    return EXIT_ERROR if report.checked == 0 else EXIT_OK


@app.command("checkpoint")
@click.option("--key", help="operator key file (32 bytes, mode 0600) to MAC the checkpoint")
@click.option("--out", type=out_path, help="also write the checkpoint to this file")
@click.pass_obj
def checkpoint_(session: Session, key: str | None, out: Path | None) -> int:
    """Take a checkpoint to keep outside the database."""
    taken = checkpoint(session.existing_db(), key=key)
    if out is not None:
        out.write_text(str(taken), encoding="utf-8")
    session.emit(taken, str(taken).rstrip("\n"))
    return EXIT_OK


@app.command("keygen")
@click.argument("path", metavar="FILE")
@click.pass_obj
def keygen(session: Session, path: str) -> int:
    """Create an operator key file for MAC-signed checkpoints (32 random bytes, mode 0600)."""
    generate_key(path)
    session.emit({"key": path}, f"wrote a new operator key to {path} (mode 0600)")
    return EXIT_OK


@app.command("prove")
@click.argument("position", type=int)
@click.option(
    "--checkpoint", "taken", type=checkpoint_file, required=True, help="a checkpoint file"
)
@click.pass_obj
def prove(session: Session, position: int, taken: TextIO) -> int:
    """Prove that an event is in the log a checkpoint describes."""
    held = Checkpoint.parse(taken.read())
    proof = prove_inclusion(session.existing_db(), position, held)
    if not verify_inclusion(proof, proof.leaf_hash, held):
        raise StorageError(f"the proof for position {position} does not verify")
    session.emit(proof)
    return EXIT_OK


@app.command("rebuild")
@click.option("--swap", is_flag=True, help="replace the live tables with the rebuild")
@click.pass_obj
def rebuild_(session: Session, swap: bool) -> int:
    """Refold every projection from the log and compare (exit 2 on a mismatch), or --swap."""
    with output.progress("rebuilt") as progress:
        report = rebuild(session.existing_db(), swap=swap, progress=progress)
    session.emit(report)
    return EXIT_OK if report.matches or swap else EXIT_TAMPERED
