"""Issue 56, done-when: the site build, ingest, claims and training on a read-only and on a full file system give
one line each (exit 2), with nothing half-written: what was there before is as it was, nothing new is left.

The fault is injected (no mount needed, and root ignores a chmod): every write under one folder fails as the
kernel fails it, at the first call that would change that file system (a folder made, a file opened for writing,
a rename, a delete on a read-only one; DuckDB opening a database to write), with EROFS or ENOSPC."""

import builtins
import contextlib
import errno
import importlib.util
import io
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import REPO
from helpers.training import TINY

from leaderboard.ingest import ingest
from leaderboard.ingest import main as ingest_main
from leaderboard.site.build import main as site_main
from peeval.cli import main as peeval_main

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@contextlib.contextmanager
def failing_writes(root: Path, code: int):
    """Every write under ``root`` raises OSError(``code``) naming the path (as the kernel's; ENOSPC: deletes still
    work, as on a full disk)."""
    root = os.path.realpath(root)
    real = {n: getattr(os, n) for n in ("mkdir", "open", "replace", "rename", "unlink", "rmdir")}
    real_open, real_connect = io.open, duckdb.connect

    def inside(p) -> bool:
        try:
            p = os.fspath(p)
        except TypeError:
            return False
        if isinstance(p, bytes):
            p = p.decode()
        return os.path.realpath(p) == root or os.path.realpath(p).startswith(root + os.sep)

    def fail(p):
        raise OSError(code, os.strerror(code), os.fspath(p))

    def guard(name, *paths):
        def f(*a, **k):
            for i in paths:
                if len(a) > i and inside(a[i]):
                    fail(a[i])
            return real[name](*a, **k)

        return f

    def os_open(path, flags, *a, **k):
        if flags & WRITE_FLAGS and inside(path):
            fail(path)
        return real["open"](path, flags, *a, **k)

    def any_open(file, mode="r", *a, **k):
        if isinstance(file, (str, bytes, os.PathLike)) and set(str(mode)) & set("wax+") and inside(file):
            fail(file)
        return real_open(file, mode, *a, **k)

    def connect(database=":memory:", read_only=False, *a, **k):
        if not read_only and inside(database):
            raise duckdb.IOException(f'IO Error: Cannot open file "{database}": {os.strerror(code)}')
        return real_connect(database, read_only, *a, **k)

    patches = {
        (os, "mkdir"): guard("mkdir", 0),
        (os, "open"): os_open,
        (os, "replace"): guard("replace", 0, 1),
        (os, "rename"): guard("rename", 0, 1),
        (io, "open"): any_open,
        (builtins, "open"): any_open,
        (duckdb, "connect"): connect,
    }
    if code == errno.EROFS:  # even a missing file's unlink is EROFS (measured on a read-only tmpfs: the claims
        # stage's cleanup of a temporary it never made was a traceback after its one line)

        def delete(name):
            return lambda p, *a, **k: fail(p) if inside(p) else real[name](p, *a, **k)

        patches[(os, "unlink")] = delete("unlink")
        patches[(os, "rmdir")] = delete("rmdir")
    saved = {key: getattr(*key) for key in patches}
    try:
        for (mod, name), f in patches.items():
            setattr(mod, name, f)
        yield
    finally:
        for (mod, name), f in saved.items():
            setattr(mod, name, f)


def tree(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes (what "nothing half-written" compares)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _claims_main(argv):
    spec = importlib.util.spec_from_file_location("claims_stage", Path(REPO) / "pipelines" / "claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    return stage.main(argv)


def one_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]
    assert len(err) == 1, err
    return err[0]


@pytest.fixture
def board(tmp_path, monkeypatch):
    """A folder holding results, their store, its claims and its site, all written before the fault."""
    from test_published import _local_run

    root = tmp_path / "board"
    root.mkdir()
    monkeypatch.chdir(root)
    _local_run(root, 30.0)
    db = root / "build" / "peeval.duckdb"
    db.parent.mkdir()
    ingest([root / "results"], db)
    assert _claims_main(["--db", str(db)]) == 0
    assert site_main(["--db", str(db), "--out", str(root / "build" / "site")]) == 0
    return root


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC], ids=["read-only", "full"])
def test_ingest_claims_and_site_on_a_faulty_file_system(board, capsys, code):
    db = board / "build" / "peeval.duckdb"
    (board / "results" / "rope2").mkdir()
    shutil.copy(board / "results" / "rope" / "results.json", board / "results" / "rope2" / "results.json")
    before = tree(board)
    capsys.readouterr()
    runs = {
        "ingest": lambda: ingest_main([str(board / "results" / "rope2"), "--db", str(db)]),
        "claims": lambda: _claims_main(["--db", str(db), "--summary", str(board / "build" / "summary.json")]),
        "site": lambda: site_main(["--db", str(db), "--out", str(board / "build" / "site")]),
    }
    for name, run in runs.items():
        with failing_writes(board, code):
            rc = run()
        line = one_line(capsys)
        assert rc == 2, (name, line)
        assert os.strerror(code) in line, (name, line)
        assert tree(board) == before, name  # the old store, verdicts and site as they were, nothing new


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC], ids=["read-only", "full"])
def test_training_on_a_faulty_file_system(corpus, tok_dir, tmp_path, capsys, code):
    root = tmp_path / "disk"
    root.mkdir()
    sets = [f"{k}={'null' if v is None else v}" for k, v in TINY.items()] + [f"corpus={corpus}", "steps=2"]
    argv = ["train", "--pe", "rope", "--profile", "smoke", "--out", str(root / "ckpt"), "--tokenizer", tok_dir]
    argv += [a for s in sets for a in ("--set", s)]
    with failing_writes(root, code):
        rc = peeval_main(argv)
    line = one_line(capsys)
    assert rc == 2 and os.strerror(code) in line and str(root / "ckpt") in line, line
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("at", ["resume state", "weights"])
def test_a_disk_that_fills_during_training_is_one_line(corpus, tok_dir, tmp_path, capsys, monkeypatch, at):
    """`peeval train --out` on a disk that fills while the run is under way (its --out made): torch.save of the
    resume state at step 3 raises a RuntimeError with no errno, safetensors' final write a SafetensorError (both
    measured on a full tmpfs): tracebacks before; now one line naming the file, exit 2, no finished-looking
    checkpoint left."""
    import safetensors
    import torch

    if at == "resume state":

        def full(obj, f, *a, **k):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

        monkeypatch.setattr(torch, "save", full)
    else:

        def full(*a, **k):
            raise safetensors.SafetensorError(
                "Error while serializing: I/O error: No space left on device (os error 28)"
            )

        import transformers.modeling_utils

        monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full)  # bound there at import
    out = tmp_path / "ckpt"
    sets = [f"{k}={'null' if v is None else v}" for k, v in TINY.items()] + [f"corpus={corpus}", "steps=4"]
    argv = ["train", "--pe", "rope", "--profile", "smoke", "--out", str(out), "--tokenizer", tok_dir]
    rc = peeval_main(argv + [a for s in sets for a in ("--set", s)])
    line = one_line(capsys)
    assert rc == 2 and str(out) in line and "Traceback" not in line, line
    assert ("disk full" if at == "resume state" else os.strerror(errno.ENOSPC)) in line, line
    assert not (out / "model.safetensors").exists() and not (out / "train_summary.json").exists()
