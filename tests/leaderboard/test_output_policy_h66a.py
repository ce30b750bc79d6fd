"""Issue 66, data loss (round 6): an output is ours only when its own writer's mark is in it, not because it looks
like one (any markdown table, any DuckDB file). One test per numbered item."""

from pathlib import Path

from conftest import REPO


def test_a_killed_publishs_temporary_folder_is_ignored_by_ingest(tmp_path):
    """Item 10: kill -9 during `publish` left a `.<profile>.XXXX` folder on the shelf; the pipeline's ingest then
    refused to run (it read the temporary as a published profile without its SOURCE.json)."""
    import shutil

    from leaderboard.ingest import ingest

    shelf = tmp_path / "published"
    shutil.copytree(Path(REPO) / "leaderboard" / "published" / "cpu", shelf / "cpu")
    half = shelf / ".cpu.k9x2ab"  # what tempfile.mkdtemp(prefix=".cpu.") left when publish was killed
    shutil.copytree(Path(REPO) / "leaderboard" / "published" / "cpu" / "results", half / "results")
    counts = ingest([], tmp_path / "s.duckdb", root=tmp_path, published=shelf)
    assert counts["runs"] > 0


def test_publish_replace_never_deletes_a_folder_whose_source_lists_no_files(tmp_path, monkeypatch, capsys):
    """Item 3: `publish --replace` deleted a user's files from a folder whose SOURCE.json had no `files` list
    ("legacy" was taken as ours)."""
    import json

    from test_published import _local_run

    from leaderboard.publish import main as publish_main

    monkeypatch.chdir(tmp_path)
    _local_run(tmp_path, 30.0)
    victim = tmp_path / "D" / "victim"
    victim.mkdir(parents=True)
    (victim / "SOURCE.json").write_text(json.dumps({"profile": "victim", "machine": "m"}))
    (victim / "thesis.tex").write_text("years of work")
    argv = ["--profile", "victim", "--machine", "m", "--out", str(tmp_path / "D"), "--replace"]
    assert publish_main(argv) == 2
    assert (victim / "thesis.tex").read_text() == "years of work"
    capsys.readouterr()
    # a folder publish wrote, one of whose listed files a user edited since, is not replaced either
    (victim / "thesis.tex").unlink()
    (victim / "SOURCE.json").unlink()
    assert publish_main(argv) == 0
    edited = next(p for p in victim.rglob("results.json"))
    edited.write_text(edited.read_text() + " ")
    assert publish_main(argv) == 2 and edited.read_text().endswith(" ")


def test_the_next_publish_removes_a_killed_publishs_temporaries_and_nothing_else(tmp_path, monkeypatch, capsys):
    """Item 10, the rest: kill -9 during `publish` left `.<profile>.XXXX` folders on the shelf for good. The next
    publish removes a dead publish's temporary (it carries the writer's mark), never a live one's, another host's or a
    user's hidden folder that merely looks like one."""
    import os
    import socket
    import subprocess
    import sys
    import time

    from test_published import _local_run

    from leaderboard.publish import main as publish_main

    monkeypatch.chdir(tmp_path)
    _local_run(tmp_path, 30.0)
    shelf = tmp_path / "D"
    script = (
        "import sys, time\n"
        "import leaderboard.publish as P\n"
        "files = P.published_files\n"
        "def slow(folder):\n"
        "    time.sleep(600)\n"
        "    return files(folder)\n"
        "P.published_files = slow\n"
        f"sys.exit(P.main(['--profile', 'zz', '--machine', 'm', '--out', {str(shelf)!r}]))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO}/tests"}
    killed = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while killed.poll() is None and time.monotonic() < deadline:
            half = [p for p in shelf.glob(".zz.*") if (p / "results").is_dir()] if shelf.is_dir() else []
            if half:
                break
            time.sleep(0.05)
        assert half, "publish made no temporary folder"
    finally:
        killed.kill()  # kill -9: no cleanup of its own
        killed.wait(30)
    assert half[0].is_dir()
    live = shelf / ".yy.abcd1234"  # a publish still running (this process) with its mark
    (live / "results").mkdir(parents=True)
    (live / ".peeval-publish-tmp").write_text(f"{socket.gethostname()} {os.getpid()}")
    elsewhere = shelf / ".yy.efgh5678"  # another host's: its pid cannot be checked from here
    (elsewhere / "results").mkdir(parents=True)
    (elsewhere / ".peeval-publish-tmp").write_text("another-host 1")
    mine = shelf / ".zz.notes123"  # a user's hidden folder named like one
    mine.mkdir()
    (mine / "todo.txt").write_text("my notes")
    capsys.readouterr()
    assert publish_main(["--profile", "xx", "--machine", "m", "--out", str(shelf)]) == 0
    assert not half[0].exists()
    assert half[0].name in capsys.readouterr().err
    assert (live / ".peeval-publish-tmp").is_file() and (elsewhere / ".peeval-publish-tmp").is_file()
    assert (mine / "todo.txt").read_text() == "my notes"
    assert (shelf / "xx" / "SOURCE.json").is_file() and not (shelf / "xx" / ".peeval-publish-tmp").exists()
