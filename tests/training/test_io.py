"""peeval._io, the one atomic-write helper (issue 15 item 3), and the training package's boundaries."""

import ast
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from peeval import _io

REPO = Path(__file__).resolve().parents[2]


def test_atomic_write_text_creates_replaces_and_leaves_no_tmp(tmp_path):
    p = tmp_path / "a" / "b" / "x.json"
    _io.atomic_write_text(p, "héllo\n")
    assert p.read_bytes() == "héllo\n".encode()
    _io.atomic_write_text(p, "second")
    assert p.read_text(encoding="utf-8") == "second"
    _io.atomic_write_bytes(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(p.parent)) == ["x.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("old")

    def half(tmp: Path) -> None:
        tmp.write_text("ne")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _io.atomic_write(p, half)
    assert p.read_text() == "old"
    assert _io.tmp_path(p) == tmp_path / "x.txt.tmp"


def test_save_dir_atomically_keeps_other_files(tmp_path):
    (tmp_path / "keep.txt").write_text("k")
    (tmp_path / "model.bin").write_text("old")
    _io.save_dir_atomically(tmp_path, lambda d: [(d / "model.bin").write_text("new"), (d / "cfg").write_text("c")])
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"keep.txt": "k", "model.bin": "new", "cfg": "c"}


def test_replace_dir_swaps_a_whole_tree(tmp_path):
    target, new = tmp_path / "site", tmp_path / ".site-new"
    (target / "sub").mkdir(parents=True)
    (target / "sub" / "stale.html").write_text("s")
    new.mkdir()
    (new / "index.html").write_text("i")
    _io.replace_dir(new, target)
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*")) == ["index.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no tmp, no -old left behind
    fresh = tmp_path / ".fresh"
    fresh.mkdir()
    _io.replace_dir(fresh, tmp_path / "new_target")  # a target that does not exist yet
    assert (tmp_path / "new_target").is_dir() and not fresh.exists()


def test_replace_dir_gives_the_folder_a_plain_mkdirs_mode(tmp_path):
    """A published profile (leaderboard.publish), an export and a dataset download are built in a mkdtemp
    folder (mode 0700): the folder swapped in is readable by others as a mkdir'ed one is (0755 under umask
    022, 0750 under 027), not private."""
    for mask, want in ((0o022, 0o755), (0o027, 0o750)):
        old = os.umask(mask)
        try:
            new = Path(tempfile.mkdtemp(dir=tmp_path))
            (new / "f.json").write_text("{}")
            target = tmp_path / f"out-{mask:o}"
            _io.replace_dir(new, target)
        finally:
            os.umask(old)
        assert stat.S_IMODE(target.stat().st_mode) == want


def _os_replace_calls(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(isinstance(n, ast.Call) and ast.unparse(n.func) in ("os.replace", "os.rename") for n in ast.walk(tree))


def test_one_atomic_write_helper():
    """Nothing but peeval/_io/__init__.py moves files into place (the DuckDB store, built by DuckDB itself in a
    temporary file with its write-ahead log, is the one exception)."""
    allowed = {"peeval/_io/__init__.py"}
    found = sorted(
        str(f.relative_to(REPO))
        for pkg in ("peeval", "pipelines", "leaderboard", "benchmarks")
        for f in (REPO / pkg).rglob("*.py")
        if _os_replace_calls(f)
    )
    assert set(found) <= allowed, f"os.replace outside peeval/_io/__init__.py: {sorted(set(found) - allowed)}"


def test_io_and_leaderboard_import_no_torch():
    code = (
        "import sys, peeval._io, leaderboard.site, leaderboard.publish, leaderboard.ingest\n"
        "print(','.join(m for m in ('torch', 'transformers') if m in sys.modules) or 'none')"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "none"


def _private_imports(rel: Path) -> list[str]:
    """``from <peeval module> import _name`` in ``rel``, where ``_name`` is not itself a module (``_io``)."""
    out = []
    for node in ast.walk(ast.parse((REPO / rel).read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if not ((node.level and rel.parts[0] == "peeval") or (node.module or "").split(".")[0] == "peeval"):
            continue
        up = list(rel.parent.parts[: len(rel.parent.parts) - node.level + 1]) if node.level else []
        base = REPO.joinpath(*up, *(node.module or "").split("."))
        for a in node.names:
            if a.name.startswith("_") and not ((base / f"{a.name}.py").is_file() or (base / a.name).is_dir()):
                out.append(f"{rel}: {node.module}.{a.name}")
    return out


def test_no_private_names_imported_across_peeval_modules():
    """What one module takes from another peeval module is public there (no ``from .train import
    _jsonable``): the training package's modules, and its callers, meet through public names."""
    pkgs = ("peeval", "pipelines", "leaderboard", "benchmarks")
    bad = [b for pkg in pkgs for f in sorted((REPO / pkg).rglob("*.py")) for b in _private_imports(f.relative_to(REPO))]
    assert not bad, bad
