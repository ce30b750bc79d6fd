"""Issue 30, item 5: readers refuse what is not theirs. Claims on a DuckDB file that is not a peeval
store wrote 90 'inconclusive' verdicts with exit 0; the site on a truncated, non-DuckDB or foreign
file gave tracebacks; ingest laid peeval's tables into any DuckDB file. Each is one line, exit 2,
and the file is left as it was."""

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

from leaderboard import ingest, site  # noqa: E402
from leaderboard.store import TABLE_COLUMNS  # noqa: E402

ingest_main, site_main = ingest.main, site.main


def foreign(tmp_path: Path) -> Path:
    db = tmp_path / "sales.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE orders (id INTEGER, amount DOUBLE)")
    con.execute("INSERT INTO orders VALUES (1, 9.5)")
    con.close()
    return db


def old_schema(tmp_path: Path) -> Path:
    """A peeval store whose runs table lacks a column this code reads."""
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    for t, cols in TABLE_COLUMNS.items():
        keep = [c for c in cols if not (t == "runs" and c == "machine")]
        con.execute(f"CREATE TABLE {t} ({', '.join(f'{c} VARCHAR' for c in keep)})")
    con.close()
    return db


def not_duckdb(tmp_path: Path) -> Path:
    f = tmp_path / "notes.duckdb"
    f.write_text("not a database\n" * 50)
    return f


def truncated(tmp_path: Path) -> Path:
    db = foreign(tmp_path)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    return db


KINDS = {"foreign": (foreign, "not a peeval store"), "old": (old_schema, "another schema"),
         "text": (not_duckdb, "cannot open as a DuckDB database"),
         "truncated": (truncated, "")}  # fmt: skip


def _one_line(err: str, needle: str, path: Path) -> None:
    lines = [li for li in err.strip().splitlines() if li.strip()]
    assert len(lines) == 1 and "Traceback" not in err and str(path) in lines[0] and needle in lines[0], err


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_claims_refuse_a_file_that_is_not_a_peeval_store(kind, tmp_path):
    make, needle = KINDS[kind]
    db = make(tmp_path)
    before = db.read_bytes()
    r = subprocess.run([sys.executable, "pipelines/claims.py", "--db", str(db), "--out", str(tmp_path / "c.duckdb")],
                       cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    _one_line(r.stderr, needle, db)
    assert not (tmp_path / "c.duckdb").exists() and db.read_bytes() == before


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_site_refuses_a_file_that_is_not_a_peeval_store(kind, tmp_path, capsys):
    make, needle = KINDS[kind]
    db = make(tmp_path)
    assert site_main(["--db", str(db), "--out", str(tmp_path / "site")]) == 2
    _one_line(capsys.readouterr().err, needle, db)
    assert sorted(p.name for p in tmp_path.iterdir()) == [db.name]  # no site, no temporary folder


@pytest.mark.parametrize("kind", ["foreign", "old"])
def test_ingest_never_writes_into_a_foreign_or_old_store(kind, tmp_path, capsys):
    make, needle = KINDS[kind]
    db = make(tmp_path)
    results = tmp_path / "results" / "r"
    results.mkdir(parents=True)
    (results / "results.json").write_text('{"results": {}}')
    before = db.read_bytes()
    assert ingest_main(["--db", str(db), "--root", str(tmp_path), str(tmp_path / "results")]) == 2
    _one_line(capsys.readouterr().err, needle, db)
    assert db.read_bytes() == before


def test_ctrl_c_in_a_leaderboard_command_is_one_line_exit_130(tmp_path, capsys, monkeypatch):
    from leaderboard import _cli

    def ctrl_c():
        raise KeyboardInterrupt

    assert _cli.run_command("site", ctrl_c, ValueError) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("site: interrupted"), lines


def test_site_on_a_locked_store_and_out_dot(tmp_path, capsys, monkeypatch):
    """A store another process holds open for writing, and ``--out .`` (the user's working folder)."""
    import time

    from test_site import make_store

    db = make_store(tmp_path / "store")
    hold = f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert site_main(["--db", str(db), "--out", str(tmp_path / "site")]) == 2
        _one_line(capsys.readouterr().err, "cannot open as a DuckDB database", db)
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.2)
    work = tmp_path / "work"
    work.mkdir()
    (work / "analysis.py").write_text("print('mine')")
    monkeypatch.chdir(work)
    assert site_main(["--db", str(db), "--out", "."]) == 2
    err = capsys.readouterr().err
    assert "analysis.py" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in work.iterdir()) == ["analysis.py"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "work"]  # no temporary folder beside it
