"""Issue 66 (faults, round 6), the data-loss items of the output policy: each test failed on ab55d3c by its
assertion."""

import shutil
from pathlib import Path

import pytest

from leaderboard.ingest import IngestError, ingest

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED_CPU = ROOT / "leaderboard" / "published" / "cpu"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_eval_never_writes_into_the_checkpoint_it_scores(tmp_path, monkeypatch, capsys):
    """Item 9: `peeval eval --output_path . --run_name CK` wrote results and samples into the checkpoint."""
    from peeval.cli import main
    from peeval.models import PeevalConfig

    monkeypatch.chdir(tmp_path)
    ck = tmp_path / "CK"
    PeevalConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                 max_position_embeddings=64, pe="rope").save_pretrained(ck)  # fmt: skip
    before = _files(ck)
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", "peeval_passkey",
            "--limit", "1", "--device", "cpu", "--output_path", ".", "--run_name", "CK"]  # fmt: skip
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [li for li in err.splitlines() if li.strip()]
    assert rc == 2, err[-2000:]
    assert "Traceback" not in err and "lies inside the input" in lines[-1] and "CK" in lines[-1], err[-2000:]
    assert _files(ck) == before  # nothing written into it
    argv[argv.index("--output_path") + 1] = str(ck)  # a run folder inside the checkpoint: refused as well
    assert main(argv) == 2 and _files(ck) == before
    assert "lies inside the input" in capsys.readouterr().err


def test_ingest_never_writes_the_store_into_its_own_input(tmp_path):
    """Item 9: `leaderboard.ingest pub/cpu --db pub/cpu/store.duckdb` wrote the store into the published folder it
    read."""
    pub = tmp_path / "pub" / "cpu"
    shutil.copytree(PUBLISHED_CPU, pub)
    before = _files(pub)
    with pytest.raises(IngestError, match="lies inside the input"):
        ingest([pub], pub / "store.duckdb", root=tmp_path)
    assert _files(pub) == before and not (pub / "store.duckdb").exists()
    counts = ingest([pub], tmp_path / "store.duckdb", root=tmp_path)  # beside it: read as before
    assert counts["runs"] > 0


def _claims_stage():
    import importlib.util

    spec = importlib.util.spec_from_file_location("claims_stage_r6", ROOT / "pipelines" / "claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    return stage


def test_claims_out_replaces_only_a_claims_database_it_wrote(tmp_path, capsys):
    """Item 6: `pipelines/claims.py --out X` replaced X when X was any DuckDB file (here: another store, and a
    user's database holding one table); only a database this stage wrote (its claims_store table) is replaced."""
    import duckdb

    from leaderboard.store import connect

    db = tmp_path / "s.duckdb"
    connect(db).close()
    other = tmp_path / "other.duckdb"
    connect(other).close()
    mine = tmp_path / "mine.duckdb"
    con = duckdb.connect(str(mine))
    con.execute("CREATE TABLE notes AS SELECT 'keep me' AS text")
    con.close()
    stage = _claims_stage()
    for x in (other, mine):
        before = x.read_bytes()
        assert stage.main(["--db", str(db), "--out", str(x)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--out" in err[0] and "never replaced" in err[0], err
        assert x.read_bytes() == before
    own = tmp_path / "claims-here.duckdb"
    assert stage.main(["--db", str(db), "--out", str(own)]) == 0
    assert stage.main(["--db", str(db), "--out", str(own)]) == 0  # its own output: replaced as before
    capsys.readouterr()


def test_bench_md_never_replaces_a_users_notes_holding_a_table(tmp_path, monkeypatch, capsys):
    """Item 5: `peeval bench --md notes.md` replaced a user's markdown notes that held a table. Only a table the
    bench wrote itself (its first line: the sha256 of the rest) is replaced; one the user edited since is not."""
    from peeval.bench import train as train_bench
    from peeval.cli import main

    monkeypatch.setattr(train_bench, "time_entry", lambda *a, **k: {"entry": a[0], "error": "not timed here"})
    argv = ["bench", "--train", "--profile", "smoke", "--pe", "rope", "--md"]
    notes = tmp_path / "notes.md"
    notes.write_text("# My notes\n\n| run | ppl |\n|---|---|\n| a | 12.5 |\n")
    before = notes.read_bytes()
    assert main([*argv, str(notes)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--md" in err[-1] and "never replaced" in err[-1] and notes.read_bytes() == before
    report = tmp_path / "report.md"
    assert main([*argv, str(report)]) == 0 and "rope" in report.read_text()
    assert main([*argv, str(report)]) == 0  # its own, unchanged: replaced
    report.write_text(report.read_text() + "\nmy comment on these numbers\n")  # edited by the user: theirs now
    edited = report.read_bytes()
    assert main([*argv, str(report)]) == 2 and report.read_bytes() == edited
    capsys.readouterr()


@pytest.mark.parametrize(
    "files",
    [
        ("pytorch_model.bin.index.json", "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"),
        ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"),
        ("config.json",),
    ],
)
def test_tokenizer_never_adds_files_to_a_model_folder(tmp_path, capsys, files):
    """Item 8: `peeval tokenizer --out` added tokenizer files to a model folder with sharded weights (its help says
    a folder holding a model is refused, with or without --overwrite)."""
    from peeval.cli import main

    model = tmp_path / "model"
    model.mkdir()
    for name in files:
        (model / name).write_bytes(b"{}" if name.endswith(".json") else b"\x00weights")
    before = _files(model)
    for extra in ([], ["--overwrite"]):
        assert main(["tokenizer", "--out", str(model), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "--out" in err[-1] and "holds a model" in err[-1] and any(f in err[-1] for f in files), err
        assert _files(model) == before


def test_weights_are_written_with_the_umasks_mode(tmp_path):
    """Item 20: train / export wrote model.safetensors mode 0600 (transformers writes it through a temporary
    file); the folder savers give it what a plain write gives (0666 less the umask: 0644 under umask 022)."""
    import os

    from peeval._io import replace_dir, save_dir_atomically
    from peeval.models import PeevalConfig, PeevalForCausalLM

    old = os.umask(0o022)
    try:
        model = PeevalForCausalLM(PeevalConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                               num_hidden_layers=1, num_attention_heads=2, pe="rope"))  # fmt: skip
        save_dir_atomically(tmp_path / "train", model.save_pretrained)  # as `peeval train` saves
        tmp = tmp_path / ".export-tmp"
        tmp.mkdir()
        model.save_pretrained(tmp)
        replace_dir(tmp, tmp_path / "export")  # as `peeval export` swaps its folder in
    finally:
        os.umask(old)
    for d in ("train", "export"):
        for f in ("model.safetensors", "config.json"):
            assert (tmp_path / d / f).stat().st_mode & 0o777 == 0o644, (d, f, oct((tmp_path / d / f).stat().st_mode))


def test_site_never_deletes_a_users_empty_folder(tmp_path):
    """Item 20: `site --out` deleted a user's empty subfolders (only files were checked against the manifest)."""
    from leaderboard.site.output import SiteOutError, write_tree

    out = tmp_path / "site"
    write_tree(out, {"index.html": "<p>one</p>", "data/a.json": "{}"})
    (out / "drafts").mkdir()  # the user's, empty
    (out / "data" / "mine").mkdir()
    with pytest.raises(SiteOutError, match="drafts/"):
        write_tree(out, {"index.html": "<p>two</p>", "data/a.json": "{}"})
    assert (out / "drafts").is_dir() and (out / "data" / "mine").is_dir()
    assert (out / "index.html").read_text() == "<p>one</p>"
    (out / "drafts").rmdir()
    (out / "data" / "mine").rmdir()
    write_tree(out, {"index.html": "<p>two</p>", "data/a.json": "{}"})  # its own folders: replaced as before
    assert (out / "index.html").read_text() == "<p>two</p>"
    fresh = tmp_path / "fresh"  # an existing folder holding only a user's empty folder: refused too
    (fresh / "photos").mkdir(parents=True)
    with pytest.raises(SiteOutError, match="photos/"):
        write_tree(fresh, {"index.html": "x"})
    assert (fresh / "photos").is_dir()


@pytest.mark.parametrize(
    "base",
    ["https://mirror.example/raw?token=SECRET123", "ftp://mirror.example/raw?token=SECRET123",
     "https://u:SECRET123@mirror.example/raw#SECRET123", "https://[::1/raw?token=SECRET123"],
)  # fmt: skip
def test_a_refused_raw_base_never_prints_its_token(monkeypatch, base):
    """Item 20: a refused `PEEVAL_DATA_RAW_BASE` printed its `?token=` query in the error."""
    from peeval.data.rebuild import DataError, raw_base, shown

    monkeypatch.setenv("PEEVAL_DATA_RAW_BASE", base)
    with pytest.raises(DataError) as e:
        raw_base()
    assert "SECRET123" not in str(e.value) and "PEEVAL_DATA_RAW_BASE" in str(e.value), str(e.value)
    assert shown("https://a:b@h.example/x/y?token=T#f") == "https://***@h.example/x/y?***"
    assert shown("https://h.example/x/y") == "https://h.example/x/y"


def test_export_overwrite_replaces_only_an_unchanged_export(tmp_path, capsys):
    """Item 4: `peeval export CK EXP --overwrite` deleted `EXP/.git/` and a user's file: a folder was judged an
    export by its README. Now only a folder whose manifest lists every file in it, unchanged, is replaced."""
    from conftest import tiny_model

    from peeval.cli import main

    ck = tmp_path / "ck"
    tiny_model("rope").save_pretrained(ck)
    exp = tmp_path / "EXP"
    assert main(["export", str(ck), str(exp)]) == 0
    card = (exp / "README.md").read_text()
    capsys.readouterr()  # transformers' progress bars
    (exp / ".git").mkdir()
    (exp / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (exp / "mine.txt").write_text("my notes")
    for change in ("git", "file", "empty folder", "edited card", "card only"):
        if change == "file":
            shutil.rmtree(exp / ".git")
        elif change == "empty folder":
            (exp / "mine.txt").unlink()
            (exp / "drafts").mkdir()
        elif change == "edited card":
            (exp / "drafts").rmdir()
            (exp / "README.md").write_text(card + "\nMy evaluation notes.\n")
        elif change == "card only":  # a hand-made folder whose README says it is an export
            shutil.rmtree(exp)
            exp.mkdir()
            (exp / "README.md").write_text(card)
        before = _files(exp)
        assert main(["export", str(ck), str(exp), "--overwrite"]) == 2, change
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not an export of peeval" in err[0], (change, err)
        assert _files(exp) == before and (change != "empty folder" or (exp / "drafts").is_dir()), change
    shutil.rmtree(exp)
    assert main(["export", str(ck), str(exp)]) == 0
    assert main(["export", str(ck), str(exp), "--overwrite"]) == 0  # its own, unchanged: replaced as before
    assert (exp / "README.md").read_text() == card
