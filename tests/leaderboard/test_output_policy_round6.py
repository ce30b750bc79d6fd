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
