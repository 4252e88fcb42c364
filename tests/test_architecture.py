"""The architecture as tests: one-way imports, and SQL in exactly two kinds of place: the
log's backends, and the read model's SQL modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("eventlog", "projections", "replay")
SQL_HOMES = {
    "eventlog/sqlite.py",
    "eventlog/postgres.py",
    "eventlog/postgres_admin.py",
    "eventlog/postgres_schema.py",
    "projections/_sql.py",
    "projections/_sql_knowledge.py",
    "projections/_sql_reads.py",
    "projections/_sql_audit.py",
    "projections/_sql_merkle.py",
    "projections/_sql_snapshots.py",
    "projections/_database.py",
}
"""The log's SQL lives in its backends; the read model's in its SQL modules: its statements
and the rows its queries return (`projections/_sql*.py`), and its connections
(`projections/_database.py`)."""
LOWER = {"eventlog": set(), "projections": {"eventlog"}, "replay": {"eventlog", "projections"}}
EVENTLOG_INTERNALS = {
    "eventlog.sqlite",
    "eventlog.rows",
    "eventlog.drafts",
    "eventlog.postgres_schema",
}
INTERNAL = "projections.internal"
"""What `replay` uses from the read side beyond its public API, in one documented module."""
PUBLIC_API_LIMIT = {"eventlog": 60, "projections": 30, "replay": 75}
"""The most names each package's `__all__` may hold: what users call and README documents."""
WHOLE_TABLES = "projections/_tables.py"
"""Reads every row of any projector table as SQLite returns it, to compare and digest whole
tables; every other row outside the SQL modules is the Struct its query declares."""
SQL_TEXT = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK|WITH)\b"
    r"|\b(FROM|WHERE|VALUES|JOIN)\b.*\?"
)


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", modules(), ids=relative)
def test_sqlite_and_sql_text_stay_in_their_two_homes(path: Path) -> None:
    """Only the log's backends and the read model's SQL modules import sqlite3 or hold SQL
    text; every other module calls them."""
    if relative(path) in SQL_HOMES:
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert "sqlite3" not in imported(tree)
    constants = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    docstrings = {
        node.body[0].value.value
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    assert [] == [text for text in constants if text not in docstrings and SQL_TEXT.search(text)]


@pytest.mark.parametrize("path", modules(), ids=relative)
def test_imports_go_one_way_through_public_modules(path: Path) -> None:
    """replay -> projections -> eventlog, never back; replay uses the `projections` package
    and its one internal module (`projections.internal`), no other, and outside eventlog
    only the read model's SQL modules reach the SQLite backend (to share its error
    translation)."""
    package = relative(path).split("/")[0]
    names = imported(ast.parse(path.read_text(encoding="utf-8")))
    for name in names:
        top = name.split(".")[0]
        if top in PACKAGES and top != package:
            assert top in LOWER[package], f"{package} imports {name}"
    if package == "replay":
        assert [] == sorted(n for n in names if n.startswith("projections.") and n != INTERNAL)
    if package != "eventlog" and relative(path) not in SQL_HOMES:
        assert [] == sorted(names & EVENTLOG_INTERNALS)


def imported_names(tree: ast.AST, module: str) -> set[str]:
    """The names `from module import ...` brings in, anywhere in `tree`."""
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == module and not node.level
        for alias in node.names
    }


def exported(module: str) -> set[str]:
    """`module`'s `__all__`, read from its source."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, ast.List)
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    raise AssertionError(f"{module} has no __all__")


@pytest.mark.parametrize("path", modules(), ids=relative)
def test_other_packages_are_used_through_their_exported_names(path: Path) -> None:
    """A module imports from another package's `__init__` (and from `projections.internal`)
    only what it exports in `__all__` (or a module of it, which the import rule above
    bounds): the public API is the boundary, not an accident."""
    package = relative(path).split("/")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for module in ("eventlog", "projections", INTERNAL):
        if module.split(".")[0] == package:
            continue
        names = imported_names(tree, module)
        modules_named = {n for n in names if (ROOT / module.replace(".", "/") / f"{n}.py").exists()}
        assert [] == sorted(names - modules_named - exported(module))


@pytest.mark.parametrize("package", PACKAGES)
def test_each_public_api_is_small(package: str) -> None:
    """Each package exports what users call, not everything another package uses."""
    assert len(exported(package)) <= PUBLIC_API_LIMIT[package]


def test_the_internal_module_exports_only_what_replay_uses() -> None:
    """`projections.internal` holds no name that no `replay` module imports from it, and
    none that `projections` already exports."""
    used = set().union(
        *(
            imported_names(ast.parse(p.read_text(encoding="utf-8")), INTERNAL)
            for p in (ROOT / "replay").rglob("*.py")
        )
    )
    assert set() == exported(INTERNAL) - used
    assert set() == exported(INTERNAL) & exported("projections")


@pytest.mark.parametrize("path", modules(), ids=relative)
def test_rows_are_read_as_their_queries_structs_outside_the_sql_modules(path: Path) -> None:
    """Outside the SQL modules no row is read by position: a query returns the Structs it
    declares (`projections._sql.Query`), and what a bare `execute` returns is only passed on
    by another `execute` (a snapshot's, a transaction's) or dropped. Whole tables, compared
    as SQLite returns them, are `WHOLE_TABLES`'s."""
    if relative(path) in SQL_HOMES or relative(path) == WHOLE_TABLES:
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    read = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        dropped = {id(s.value) for s in ast.walk(function) if isinstance(s, ast.Expr)}
        passed_on = {id(s.value) for s in ast.walk(function) if isinstance(s, ast.Return)}
        for call in ast.walk(function):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "execute"
                and id(call) not in dropped
                and not (function.name == "execute" and id(call) in passed_on)
            ):
                read.append(f"{function.name}:{call.lineno}")
    assert [] == read


ARCHITECTURE = ROOT / "docs" / "architecture.md"
NAMED = re.compile(r"`((?:eventlog|projections|replay)/[\w/]+\.py)(?::([\w.]+))?`")


def named_in_architecture() -> list[tuple[str, str | None]]:
    return [(m[1], m[2]) for m in NAMED.finditer(ARCHITECTURE.read_text(encoding="utf-8"))]


def defines(tree: ast.Module, dotted: str) -> bool:
    """Whether `dotted` (a function, a class, a constant, or `Class.method`) is defined at
    the top of `tree`."""
    scope: list[ast.stmt] = tree.body
    for part in dotted.split("."):
        found = [node for node in scope if part in _names(node)]
        if not found:
            return False
        scope = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return True


def _names(node: ast.stmt) -> set[str]:
    """The names a statement at the top of a module or class defines."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    return set()


def test_architecture_names_every_module_and_only_modules_that_exist() -> None:
    """docs/architecture.md names every module of the packages, and every module path it
    names exists: the map cannot fall behind the code."""
    named = {path for path, _ in named_in_architecture()}
    assert [] == sorted(p for p in named if not (ROOT / p).is_file())
    assert [] == sorted(relative(p) for p in modules() if relative(p) not in named)


def test_architecture_names_only_functions_that_exist() -> None:
    """Every `file:function` step of the data flows in docs/architecture.md is defined in
    that file."""
    missing = [
        f"{path}:{name}"
        for path, name in named_in_architecture()
        if name is not None
        and (ROOT / path).is_file()
        and not defines(ast.parse((ROOT / path).read_text(encoding="utf-8")), name)
    ]
    assert [] == missing


def test_every_projections_module_but_the_two_doors_is_private_by_name() -> None:
    """`projections/__init__.py` (the public API) and `projections/internal.py` (what
    `replay` uses) are the package's only modules without a leading underscore."""
    public = sorted(
        p.name for p in (ROOT / "projections").glob("*.py") if not p.name.startswith("_")
    )
    assert ["internal.py"] == public
