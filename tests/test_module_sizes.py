"""Issue 41, done-when: no module under peeval/ or leaderboard/ over 500 lines and no class over 300 (the Triton
kernels excepted), so that a file stays one reason to change that a newcomer reads in one sitting."""

import ast
from pathlib import Path

import pytest
from conftest import REPO

MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300
ROOTS = ("peeval", "leaderboard")
#: the Triton kernels: one @triton.jit body per kernel, split only at the cost of reading it
EXCLUDED = ("peeval/kernels/",)


def sources() -> list[Path]:
    files = [p for root in ROOTS for p in sorted((Path(REPO) / root).rglob("*.py"))]
    return [p for p in files if not p.relative_to(REPO).as_posix().startswith(EXCLUDED)]


def oversized(path: Path) -> list[str]:
    """What in ``path`` is over the limits, one line each (empty: within them)."""
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
    found = []
    if (n := len(text.splitlines())) > MAX_MODULE_LINES:
        found.append(f"{rel}: {n} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if (n := node.end_lineno - start + 1) > MAX_CLASS_LINES:
                found.append(f"{rel}:{node.lineno}: class {node.name} is {n} lines (at most {MAX_CLASS_LINES})")
    return found


def test_the_walk_sees_both_packages_and_skips_only_the_kernels():
    rels = {p.relative_to(REPO).as_posix() for p in sources()}
    assert "peeval/models/attention.py" in rels and "leaderboard/ingest/__init__.py" in rels
    assert not any(r.startswith("peeval/kernels/") for r in rels)
    assert any((Path(REPO) / "peeval" / "kernels").glob("*.py"))  # there is something to skip


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("x = 1\n" * MAX_MODULE_LINES, []),
        ("x = 1\n" * (MAX_MODULE_LINES + 1), [f"{MAX_MODULE_LINES + 1} lines"]),
        ("class A:\n" + "    x = 1\n" * (MAX_CLASS_LINES - 1), []),
        ("@dataclass\nclass A:\n" + "    x = 1\n" * (MAX_CLASS_LINES - 1), [f"class A is {MAX_CLASS_LINES + 1}"]),
    ],
)
def test_the_limits_are_counted_as_stated(tmp_path, text, want):
    path = tmp_path / "m.py"
    path.write_text(text)
    got = oversized(path)
    assert len(got) == len(want) and all(w in g for w, g in zip(want, got, strict=True)), got


def test_no_module_or_class_is_over_the_limits():
    found = [line for path in sources() for line in oversized(path)]
    assert not found, "\n".join(found)
