"""Issue 59: every import of every module of peeval/ and leaderboard/ against the layer table that opens
docs/design.md (read from there, so the diagram and the check cannot drift apart): a package imports only what
stands on a lower row of its own column, leaderboard's column only peeval's library rows, peeval never leaderboard."""

import ast
import re
from pathlib import Path

import pytest
from conftest import REPO

DESIGN = Path(REPO) / "docs" / "design.md"
ROOTS = ("peeval", "leaderboard")


def layer_table(text: str) -> tuple[dict[str, tuple[str, int]], int]:
    """``{unit: (column, row)}`` from the design doc's first code block, and the highest peeval row that
    leaderboard may import (``peeval rows 0-N``)."""
    block = re.search(r"```\n(row .*?)```", text, re.S)[1].splitlines()
    header = block[0]
    right = header.index("leaderboard")
    units = {}
    for line in block[1:]:
        row = int(line[:right].split()[0])
        for col, cells in (("peeval", line[:right].split()[1:]), ("leaderboard", line[right:].split())):
            for cell in cells:
                assert f"{col}.{cell}" not in units, f"{cell} twice in the table"
                units[f"{col}.{cell}"] = (col, row)
    library = int(re.search(r"leaderboard's column stands on peeval rows 0-(\d+)", text)[1])
    return units, library


def allowed_upward(text: str) -> set[tuple[str, str]]:
    """The design doc's list of allowed upward imports: ``- `path` -> `module`: why``."""
    return set(re.findall(r"^- `([\w/.]+\.py)` -> `([\w.]+)`:", text, re.M))


def unit_of(module: str, units: dict) -> str | None:
    """The table's entry that ``module`` belongs to (the longest prefix), None for a root package itself."""
    found = [u for u in units if module == u or module.startswith(u + ".")]
    return max(found, key=len) if found else None


def imports_of(path: Path, rel: str) -> list[tuple[int, str]]:
    """(line, module) for every import of a peeval / leaderboard module in the file (relative ones resolved;
    ``from peeval import x`` names ``peeval.x``: a package of the table, or a name of the root's own)."""
    package = list(Path(rel).parts[:-1])  # an __init__.py's own package, or the module's
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found += [(node.lineno, f"{module}.{a.name}" if module in ROOTS else module) for a in node.names]
    return [(n, m) for n, m in found if m.split(".")[0] in ROOTS]


def upward(importer: str, imported: str, units: dict, library: int) -> bool:
    """Whether an import of ``imported`` from ``importer`` (two entries of the table) breaks the layers."""
    (col_a, row_a), (col_b, row_b) = units[importer], units[imported]
    if importer == imported:
        return False
    if col_a == col_b:
        return row_b >= row_a
    return not (col_a == "leaderboard" and col_b == "peeval" and row_b <= library)


def violations(root: Path = Path(REPO)) -> list[str]:
    text = DESIGN.read_text(encoding="utf-8")
    units, library = layer_table(text)
    allowed, seen = allowed_upward(text), set()
    bad = []
    for path in sorted(p for r in ROOTS for p in (root / r).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        me = ".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__")
        if me in ROOTS:  # the front doors (peeval.__version__; leaderboard's docstring)
            continue
        mine = unit_of(me, units)
        if mine is None:
            bad.append(f"{rel}: not in docs/design.md's layer table (add its package or module to a row)")
            continue
        for line, module in imports_of(path, rel):
            other = unit_of(module, units)
            if other is None:  # the root package itself: `import peeval` reads its __version__
                continue
            if upward(mine, other, units, library):
                if (rel, module) in allowed:
                    seen.add((rel, module))
                    continue
                (ca, ra), (cb, rb) = units[mine], units[other]
                bad.append(f"{rel}:{line}: {mine} ({ca} row {ra}) imports {module} ({cb} row {rb})")
    if root == Path(REPO):
        bad += [f"{r} -> {m}: listed as allowed in docs/design.md, but not imported" for r, m in sorted(allowed - seen)]
    return bad


def test_no_module_imports_up_a_layer():
    bad = violations()
    assert not bad, "imports against docs/design.md's layers:\n" + "\n".join(bad)


def test_the_table_is_read_as_drawn():
    units, library = layer_table(DESIGN.read_text(encoding="utf-8"))
    assert units["peeval._log"] == ("peeval", 0) and units["peeval.cli"] == ("peeval", 7)
    assert units["leaderboard.site"] == ("leaderboard", 8) and library == 5
    assert allowed_upward(DESIGN.read_text(encoding="utf-8")) == set()  # none today
    assert allowed_upward("- `peeval/a.py` -> `peeval.b`: why\n") == {("peeval/a.py", "peeval.b")}
    assert {u.split(".")[1] for u in units if u.startswith("peeval.")} >= {"models", "tasks", "training", "data"}


@pytest.mark.parametrize(
    ("importer", "imported", "up"),
    [
        ("peeval.models", "peeval.kernels", False),  # a lower row
        ("peeval.kernels", "peeval.models", True),  # a higher row
        ("peeval.evaluation", "peeval.bench", True),  # the same row
        ("leaderboard.site", "peeval.harness", False),  # leaderboard on peeval's library
        ("leaderboard.claims", "peeval.evaluation", True),  # ... never on its commands
        ("leaderboard.store", "peeval.cli", True),  # ... never on its commands
        ("peeval.training", "leaderboard.store", True),  # peeval never imports leaderboard
        ("leaderboard.publish", "leaderboard.ingest", False),
    ],
)
def test_the_rule(importer, imported, up):
    units, library = layer_table(DESIGN.read_text(encoding="utf-8"))
    assert upward(importer, imported, units, library) is up


def test_an_upward_import_is_caught(tmp_path):
    """A copy of a low module with one import from above it fails, naming the file, the line and both rows."""
    for r in ROOTS:
        (tmp_path / r).mkdir()
    (tmp_path / "peeval" / "_log.py").write_text("import logging\n\n\ndef f():\n    from peeval.training import loop\n")
    (tmp_path / "peeval" / "tasks").mkdir()
    (tmp_path / "peeval" / "tasks" / "x.py").write_text("from ..records import names\nfrom peeval import cli\n")
    assert violations(tmp_path) == [
        "peeval/_log.py:5: peeval._log (peeval row 0) imports peeval.training (peeval row 5)",
        "peeval/tasks/x.py:2: peeval.tasks (peeval row 4) imports peeval.cli (peeval row 7)",
    ]
