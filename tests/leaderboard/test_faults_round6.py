"""Issue 66 (faults, round 6), the silent wrong numbers and tracebacks: each test failed on ab55d3c by its assertion."""

import json
import math

import pytest
from helpers.data_mirror import needs_mirror
from test_sources import _smoke_tape
from test_store_consistency import _copy_checkpoint

from leaderboard.ingest import IngestError, ingest


def test_seeds_scored_over_other_documents_are_never_one_cell(tmp_path, monkeypatch):
    """Item 13: two seeds scored with `max_docs` 2 and 3 (same targets) were averaged as "2 seeds": the protocol
    string left `max_docs` out. Now the options that change what is scored are part of a cell's protocol."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    for d, n in ((results, 2),):
        doc = json.loads((d / "results.json").read_text())
        doc["configs"]["peeval_ppl_pg19"]["metadata"]["max_docs"] = n
        (d / "results.json").write_text(json.dumps(doc))
    d2, ck2 = _copy_checkpoint(tmp_path, results, ck, "tape-seed1", b"seed 1 weights")
    summary = json.loads((ck2 / "train_summary.json").read_text())
    (ck2 / "train_summary.json").write_text(json.dumps({**summary, "seed": 1}))
    doc = json.loads((d2 / "results.json").read_text())
    doc["configs"]["peeval_ppl_pg19"]["metadata"]["max_docs"] = 3
    (d2 / "results.json").write_text(json.dumps(doc))
    with pytest.raises(IngestError, match="max_docs"):
        ingest([results, ck, d2, ck2], tmp_path / "a.duckdb")
    assert not (tmp_path / "a.duckdb").exists()


def test_the_recorded_protocol_names_max_docs():
    """Item 13, at the source: the words a run records for its protocol include max_docs and max_windows."""
    from peeval.tasks.ppl.ppl import describe_protocol

    assert describe_protocol({"max_docs": 2}) != describe_protocol({"max_docs": 3})
    assert "max_docs 2" in describe_protocol({"max_docs": 2})
    assert describe_protocol({}) == "fixed targets: 16384 tokens, skip 4096, seed 0"  # the published runs' words


@pytest.mark.parametrize("big", [1.0e308, 1.7e308])
def test_mean_stderr_of_huge_finite_values_is_finite(big):
    """Item 16: `records.stats.mean_stderr` returned inf for two seeds at ~1e308 (their sum overflows)."""
    from peeval.records.stats import mean_stderr

    m, se = mean_stderr([big, big * 0.9])
    assert math.isfinite(m) and m == pytest.approx(big * 0.95, rel=1e-12)
    assert se is not None and math.isfinite(se) and se == pytest.approx(big * 0.05, rel=1e-9)
    assert mean_stderr([1.0, 2.0, 4.0])[0] == pytest.approx(7.0 / 3.0, rel=1e-15)
    assert mean_stderr([3.0, math.inf])[0] == math.inf  # an exploded model keeps its +inf


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 9e307), (1.0, 1.7e308), (-1.7e308, 1.7e308)])
def test_axis_ticks_of_huge_values_never_overflow(lo, hi):
    """Item 16: a run with ppl >= ~5e307 crashed the site (`OverflowError` in `charts._ticks`)."""
    from leaderboard.site.charts import _ticks

    ticks = _ticks(lo, hi, False)
    assert 2 <= len(ticks) <= 12 and all(math.isfinite(t) and lo <= t <= hi for t in ticks)
    assert ticks == sorted(ticks)


@pytest.mark.parametrize("flag", [["--samples", '{"peeval_ppl_pg19": [0]}'], ["--apply_chat_template"]])
def test_like_refuses_lm_evals_flags_that_change_what_is_scored(tmp_path, capsys, flag):
    """Item 14: `peeval eval --like cpu --samples ...` scored 745 tokens at two lengths instead of 16,390 at five,
    and the results still said `like: cpu`."""
    from peeval.cli import main

    out = tmp_path / "out"
    code = main(["eval", "--device", "cpu", "--like", "cpu", "--model_args", f"pretrained={tmp_path / 'ck'}",
                 "--output_path", str(out), "--run_name", "x", *flag])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and flag[0] in err[0] and "--like" in err[0], err
    assert not out.exists()


def test_the_claims_fingerprint_covers_every_table_the_claims_read(tmp_path):
    """Item 11: the fingerprint hashed run ids only: three runs' validation losses changed in train_curve.csv and
    re-ingested kept the old claims on the site. Every table of the store now counts, value by value."""
    import shutil

    import duckdb
    from test_store_consistency import _published_store

    from leaderboard.store import store_fingerprint

    db = _published_store(tmp_path, "a", 30.0)
    con = duckdb.connect(str(db), read_only=True)
    before = store_fingerprint(con)
    tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()]
    filled = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    cols = {
        t: [c for (c, ty) in con.execute(f"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = "
                                          f"'{t}' AND data_type IN ('DOUBLE', 'BIGINT', 'INTEGER')").fetchall()]  # noqa: E501
        for t in tables
    }  # fmt: skip
    con.close()
    assert store_fingerprint(duckdb.connect(str(db), read_only=True)) == before  # stable
    edited = [t for t in ("training_curves", "metrics", "ppl_blocks", "samples", "efficiency") if filled.get(t)]
    assert {"training_curves", "metrics"} <= set(edited), filled
    for t in edited:
        col = cols[t][0]
        copy = tmp_path / f"{t}.duckdb"
        shutil.copyfile(db, copy)
        c = duckdb.connect(str(copy))
        c.execute(f'UPDATE "{t}" SET "{col}" = coalesce("{col}", 0) + 1 WHERE rowid = (SELECT min(rowid) FROM "{t}")')
        assert store_fingerprint(c) != before, t
        c.close()


def test_claims_of_the_default_local_source_on_a_published_store_are_refused(tmp_path, capsys):
    """Item 15: `pipelines/claims.py` with the default `--source local` on a store holding only published runs:
    exit 0, "99 not measured", and a site built on it showed 0 reproduced."""
    from test_store_consistency import _claims_stage, _published_store

    db = _published_store(tmp_path, "a", 30.0)
    capsys.readouterr()
    assert _claims_stage().main(["--db", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'local'" in err[0] and "--source published/cpu" in err[0], err
    assert not db.with_name("claims.duckdb").exists()


DEEP = "[" * 50_000


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--pe", "rope", "--pe_options", DEEP, "--out", "OUT"],
        ["train", "--pe", "rope", "--set", f"steps={DEEP}", "--out", "OUT"],
        ["eval", "--device", "cpu", "--model", "peeval", "--model_args", "pretrained=CK", "--tasks", "peeval_ppl_pg19",
         "--metadata", DEEP, "--output_path", "OUT"],
    ],
)  # fmt: skip
def test_deeply_nested_json_options_are_one_line(tmp_path, capsys, argv):
    """Item 19: `[` x 50,000 in --metadata or --pe_options was a RecursionError traceback."""
    from peeval.cli import main

    out = tmp_path / "out"
    argv = [str(out) if a == "OUT" else f"pretrained={tmp_path / 'ck'}" if a == "pretrained=CK" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nested too deeply" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("where", ["results", "samples"])
def test_deeply_nested_json_in_a_run_is_refused_in_one_line(tmp_path, monkeypatch, where):
    """Item 19: a results.json (or a samples line) of `[` x 50,000 was a RecursionError traceback at ingest."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    if where == "results":
        (results / "results.json").write_text(DEEP + "]" * 50_000)
    else:
        (results / "samples_peeval_ppl_pg19_2026-01-01T00-00-00.jsonl").write_text(DEEP + "\n")
    with pytest.raises(IngestError, match="nested too deeply"):
        ingest([results, ck], tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[1, 2]", "must be a JSON object"),
        (b"{bad", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"dry_run_cpu": "false", "device": "cpu"}', "dry_run_cpu must be true or false"),
    ],
)
def test_publish_of_a_tarball_with_a_malformed_manifest_is_one_line(tmp_path, capsys, body, says):
    """Item 18: `publish --tarball` with a malformed gpu_diag.json was a traceback, and `"dry_run_cpu": "false"`
    (a string) was read as a dry run."""
    import tarfile

    from leaderboard import publish

    manifest = tmp_path / "gpu_diag.json"
    manifest.write_bytes(body)
    tarball = tmp_path / "t.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(manifest, "gpu_diag.json")
    out = tmp_path / "published"
    assert publish.main(["--profile", "gpu-diag", "--machine", "x", "--tarball", str(tarball), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "gpu_diag.json" in err[0], err
    assert not (out / "gpu-diag").exists()


@needs_mirror("local", "gutenberg-eval")
def test_a_run_whose_samples_file_is_gone_or_foreign_is_refused(tmp_path, monkeypatch):
    """Item 12: with the samples file deleted or renamed, the check of a run's numbers against its samples was
    skipped and the run ingested; a samples file of another task beside it was read as the run's. The writer now
    records the samples files it wrote, and ingest holds the folder to that list."""
    import shutil

    from helpers.checkpoints import save_tiny_checkpoint

    from peeval.cli import main

    monkeypatch.chdir(tmp_path)
    ck = save_tiny_checkpoint(tmp_path / "ck" / "rope", ["the cat sat on the mat 0123456789 and the dog ran"],
                              pe="rope", vocab_size=300, max_positions=64)  # fmt: skip
    md = {"lengths": [16, 32], "targets": 40, "skip": 0, "max_docs": 2}
    argv = ["eval", "--device", "cpu", "--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks",
            "peeval_ppl_pg19", "--metadata", json.dumps(md), "--output_path", "res", "--run_name", "r"]  # fmt: skip
    assert main(argv) == 0
    run = tmp_path / "res" / "r"
    doc = json.loads((run / "results.json").read_text())
    assert doc["peeval"].get("samples_files") == ["samples_peeval_ppl_pg19.jsonl"]
    good = tmp_path / "good"
    shutil.copytree(run, good)
    ingest([good], tmp_path / "ok.duckdb")  # as written: read
    (run / "samples_peeval_ppl_pg19.jsonl").rename(run / "samples_peeval_ppl_pg19.jsonl.bak")
    with pytest.raises(IngestError, match="samples_peeval_ppl_pg19.jsonl is missing"):
        ingest([run], tmp_path / "a.duckdb")
    assert not (tmp_path / "a.duckdb").exists()
    (run / "samples_peeval_ppl_pg19.jsonl.bak").rename(run / "samples_peeval_ppl_pg19.jsonl")
    shutil.copyfile(run / "samples_peeval_ppl_pg19.jsonl", run / "samples_peeval_ppl_proof_pile.jsonl")
    with pytest.raises(IngestError, match="samples_peeval_ppl_proof_pile.jsonl lies beside it"):
        ingest([run], tmp_path / "b.duckdb")
    assert not (tmp_path / "b.duckdb").exists()


@pytest.mark.parametrize("new_store", [True, False], ids=["new store", "existing store"])
def test_ingest_on_a_disk_that_fills_at_commit_is_one_line(tmp_path, monkeypatch, new_store):
    """Item 17: ingest on a disk that fills at COMMIT: `TransactionException: cannot rollback` (a traceback) and a
    0-byte .wal left beside the store. DuckDB ends the transaction when its COMMIT fails, as here."""
    import duckdb

    from leaderboard.ingest import writer

    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    db = tmp_path / "s.duckdb"
    if not new_store:
        from test_store_consistency import _published_store

        db = _published_store(tmp_path, "a", 30.0)
    before = db.read_bytes() if db.exists() else None
    real = writer.connect

    class FullAtCommit:
        def __init__(self, con):
            self.con = con

        def execute(self, sql, *a, **k):
            if sql.strip().upper() == "COMMIT":
                self.con.execute("ROLLBACK")  # what a failed COMMIT leaves: no transaction
                db.with_name(db.name + ".wal").write_bytes(b"")
                raise duckdb.IOException("Could not write file: No space left on device")
            return self.con.execute(sql, *a, **k)

        def __getattr__(self, name):
            return getattr(self.con, name)

    monkeypatch.setattr(writer, "connect", lambda *a, **k: FullAtCommit(real(*a, **k)))
    with pytest.raises(IngestError, match="No space left on device"):
        ingest([results, ck], db)
    assert not db.with_name(db.name + ".wal").exists()
    assert (db.read_bytes() if db.exists() else None) == before
