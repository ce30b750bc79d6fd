"""Issue 30, item 6: one line, never a traceback, for Ctrl-C (exit 130) and a full disk (the path
named), with nothing the user had gone and no temporary file left. A full disk is injected where
the commands write (ENOSPC from ``write()`` names no file: peeval names it)."""

import errno
from pathlib import Path

import pytest
from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import needs_mirror


def full_disk(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")  # as write() raises it: no file named


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _lines(err: str) -> list[str]:
    """stderr without progress bars and transformers' own log lines: peeval's lines."""
    noise = ("it/s]", "examples/s]", "%|", "Loading weights", "[transformers]")  # datasets' bars on a cold cache
    return [li for li in err.splitlines() if li.strip() and not any(n in li for n in noise)]


def test_atomic_write_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    from peeval import _io

    target = tmp_path / "results.json"
    target.write_text("the old run")
    with pytest.raises(OSError) as e:
        _io.atomic_write(target, lambda tmp: (tmp.write_text("half"), full_disk()))
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(target)
    assert tree(tmp_path) == {"results.json": b"the old run"}


def test_eval_interrupted_is_one_line_exit_130_nothing_written(tmp_path, capsys, monkeypatch):
    from lm_eval import evaluator

    from peeval.cli import main

    ck = save_tiny_checkpoint(tmp_path / "ck", ["the cat sat on the mat 0123"], pe="rope", vocab_size=280,
                              max_positions=64)  # fmt: skip

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluator, "simple_evaluate", ctrl_c)
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", "peeval_diag_addition_test",
            "--limit", "2", "--device", "cpu", "--output_path", str(tmp_path / "o")]  # fmt: skip
    rc = main(argv)
    lines = _lines(capsys.readouterr().err)
    assert rc == 130 and len(lines) == 1 and lines[0].startswith("peeval eval: interrupted"), lines
    assert not (tmp_path / "o").exists()


@needs_mirror("local", "gutenberg-train")
def test_tokenizer_on_a_full_disk_names_the_folder_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    from transformers import PreTrainedTokenizerFast

    from peeval.cli import main

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", full_disk)
    out = tmp_path / "tok"
    rc = main(["tokenizer", "--out", str(out), "--profile", "smoke"])
    lines = _lines(capsys.readouterr().err)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("peeval tokenizer: error: No space left on device") and str(out) in lines[0], lines
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("existing", [False, True])
def test_ingest_on_a_full_disk_keeps_the_store_and_creates_none(existing, tmp_path, capsys, monkeypatch):
    import duckdb

    from leaderboard import ingest, store

    res = tmp_path / "results" / "r"
    res.mkdir(parents=True)
    db = tmp_path / "peeval.duckdb"
    if existing:
        store.connect(db).close()  # an empty store of this schema
    (res / "results.json").write_text("{}")
    before = tree(tmp_path)

    def parse(d, root):
        return {t: [] for t in store.TABLE_COLUMNS} | {"runs": [{"run_id": "r1", "results_path": "r"}]}

    def insert(con, table, rows):
        raise duckdb.IOException("IO Error: No space left on device")

    monkeypatch.setattr(ingest, "parse_results_dir", parse)
    monkeypatch.setattr(ingest.writer, "insert_rows", insert)  # the transaction: leaderboard.ingest.writer
    assert ingest.main(["--db", str(db), "--root", str(tmp_path), str(tmp_path / "results")]) == 2
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and "No space left" in lines[0] and str(db) in lines[0], lines
    assert tree(tmp_path) == before  # the old store byte for byte, or no store at all


@pytest.mark.parametrize("existing", [False, True])
def test_publish_on_a_full_disk_keeps_the_published_folder(existing, tmp_path, capsys, monkeypatch):
    """``leaderboard.publish --replace`` whose copy fails is one line naming the folder, exit 2; the
    folder published before is as it was (or there is none) and no temporary is left."""
    import json

    from leaderboard import publish

    monkeypatch.chdir(tmp_path)
    d = tmp_path / "results" / "rope"
    d.mkdir(parents=True)
    prov = {"peeval_version": "0.1.0", "git_commit": "abc", "model": "peeval", "model_args": {}, "pe": "rope",
            "max_length": 128, "training_length": 64, "dtype": "torch.float32", "seed": 0, "device": "cpu",
            "versions": {}, "date": "2026-11-22T10:00:00+00:00", "protocol": {"ppl": "disjoint windows"}}  # fmt: skip
    res = {"results": {"peeval_ppl_pg19": {"ppl@64,none": 30.0}}, "peeval": prov}
    (d / "results.json").write_text(json.dumps(res))
    (tmp_path / "checkpoints").mkdir()  # no checkpoints: the results alone
    out = tmp_path / "published"
    argv = ["--profile", "cpu", "--machine", "this laptop", "--out", str(out)]
    if existing:
        assert publish.main(argv) == 0
        argv.append("--replace")
    before = tree(tmp_path)
    capsys.readouterr()
    write_text = Path.write_text

    def full_under_out(self, *a, **k):  # the disk that holds the published folder is full
        if self.is_relative_to(out):
            full_disk()
        return write_text(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full_under_out)
    assert publish.main(argv) == 2
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and "No space left on device" in lines[0] and str(out / "cpu") in lines[0], lines
    assert tree(tmp_path) == before
    assert not list(tmp_path.rglob(".*")), sorted(tmp_path.rglob(".*"))
