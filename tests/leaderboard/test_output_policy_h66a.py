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
