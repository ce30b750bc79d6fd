"""How the ``python -m leaderboard.<module>`` commands end: one line, exit 0 or 2 (leaderboard._cli)."""

from __future__ import annotations

import pytest

from leaderboard._cli import run_command


def test_run_command_success_and_expected_error(capsys):
    assert run_command("x", lambda: "done", ValueError) == 0
    assert capsys.readouterr().out == "x: done\n"

    def bad() -> str:
        raise ValueError("--flag 3: allowed 1 or 2")

    assert run_command("x", bad, ValueError) == 2
    got = capsys.readouterr()
    assert got.out == "" and got.err == "x: error: --flag 3: allowed 1 or 2\n"


def test_run_command_lets_unexpected_errors_through():
    def boom() -> str:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run_command("x", boom, ValueError)


def test_ingest_main_nothing_to_ingest_is_one_line(tmp_path, capsys):
    from leaderboard.ingest import main

    db = tmp_path / "s.duckdb"
    assert main([str(tmp_path), "--db", str(db)]) == 2
    got = capsys.readouterr()
    lines = got.err.strip().splitlines()
    assert got.out == "" and len(lines) == 1 and lines[0].startswith("ingest: error: nothing to ingest"), lines
    assert not db.exists()
