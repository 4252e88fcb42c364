"""docs/cli.md, generated from the commands themselves: `python -m replay.cli.docs > docs/cli.md`.

Each command's section is its `--help`, laid out at a fixed width so the file does not depend on
the terminal that wrote it; tests/test_docs.py holds the file to the commands.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click

from replay.cli.app import PROG, app

WIDTH = 80
"""The width every command's help is laid out at."""

REGENERATE = "python -m replay.cli.docs > docs/cli.md"
"""The command that writes docs/cli.md."""

_HEADER = f"""# The command line

Every `{PROG}` command, with its `--help`. This file is generated from the commands: do not
edit it by hand. After changing a command, run `{REGENERATE}`
(tests/test_docs.py fails until the file matches the commands). README's command table says
in one line what each command is for.

Every command takes `--db PATH`, `--dsn DSN` and `--json`, before or after its name.
"""


def _contexts(
    command: click.Command, name: str, parent: click.Context | None
) -> Iterator[click.Context]:
    """A context for `command` and, depth first in name order, for each of its subcommands,
    with the settings the command line gives them (`-h` and `--help`)."""
    settings = {**command.context_settings, "terminal_width": WIDTH}
    ctx = click.Context(command, info_name=name, parent=parent, **settings)
    yield ctx
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            assert sub is not None
            yield from _contexts(sub, sub_name, ctx)


def _anchor(path: str) -> str:
    """The anchor GitHub gives the heading `path` (a command path: letters, digits, - and
    spaces)."""
    return path.lower().replace(" ", "-")


def reference() -> str:
    """docs/cli.md: a list of the commands, then each command's help."""
    contexts = list(_contexts(app, PROG, None))
    listed = [
        f"- [`{ctx.command_path}`](#{_anchor(ctx.command_path)}): "
        f"{ctx.command.get_short_help_str()}"
        for ctx in contexts[1:]
    ]
    sections = [
        f"## {ctx.command_path}\n\n```text\n{ctx.command.get_help(ctx)}\n```\n" for ctx in contexts
    ]
    return "\n".join([_HEADER, "\n".join(listed) + "\n", *sections])


def main() -> None:
    """Print docs/cli.md."""
    sys.stdout.write(reference())


if __name__ == "__main__":
    main()
