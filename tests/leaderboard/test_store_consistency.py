"""Issue 56, silent wrong numbers in the store: metrics are numbers (no booleans), one training run is one seed
however its bytes were copied, a seed mean never overflows, one cell averages runs of one protocol only."""

import hashlib
import json
import math
import shutil

import duckdb
import pytest
from helpers.duck import query as _q
from test_sources import _smoke_tape

from leaderboard.ingest import IngestError, ingest
from leaderboard.site.context import VIEWS, view_sections


def _copy_checkpoint(tmp_path, results, ck, name: str, weights: bytes):
    """``ck`` copied to ``name`` with other weight bytes (the same tensors, another ``__metadata__``) and evaluated
    into results/<name>: its results record the copy's sha256."""
    ck2 = ck.with_name(name)
    shutil.copytree(ck, ck2)
    (ck2 / "model.safetensors").write_bytes(weights)
    doc = json.loads((results / "results.json").read_text())
    doc["peeval"]["checkpoint"] = doc["peeval"]["model_args"]["pretrained"] = f"checkpoints/pretrain/{name}"
    doc["peeval"]["checkpoint_sha256"] = hashlib.sha256(weights).hexdigest()
    d = results.with_name(name)
    d.mkdir()
    (d / "results.json").write_text(json.dumps(doc))
    return d, ck2


def test_a_boolean_metric_is_refused(tmp_path, monkeypatch, capsys):
    """results.json `"ppl@64,none": true` was stored as 1.0 (and false as 0.0) and shown on the board."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    doc = json.loads((results / "results.json").read_text())
    key = next(k for k in doc["results"]["peeval_ppl_pg19"] if k.startswith("bpb@"))
    doc["results"]["peeval_ppl_pg19"][key] = False
    (results / "results.json").write_text(json.dumps(doc))
    with pytest.raises(IngestError, match=r"expected a number, got false"):
        ingest([results, ck], tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()


def test_a_copied_checkpoint_with_other_metadata_is_one_seed(tmp_path, monkeypatch):
    """A copy of a checkpoint differing only in its safetensors `__metadata__` was counted as a second seed
    ("rope 301.4 (2 seeds)"): the copy's sha256 differs, its training run (seed, settings, data) does not."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    d2, ck2 = _copy_checkpoint(tmp_path, results, ck, "tape-copy", b"smoke weights with other metadata")
    with pytest.raises(IngestError, match="the same training run"):
        ingest([results, ck, d2, ck2], tmp_path / "a.duckdb")
    db = tmp_path / "b.duckdb"
    ingest([results, ck], db)
    with pytest.raises(IngestError, match="in the store"):  # a later ingest of the copy, too
        ingest([d2, ck2], db)
    assert _q(db, "SELECT count(*) FROM runs") == [(1,)]
    # a second seed proper (another seed in its summary) is one more seed of the row
    summary = json.loads((ck2 / "train_summary.json").read_text())
    (ck2 / "train_summary.json").write_text(json.dumps({**summary, "seed": 1}))
    ingest([d2, ck2], db)
    assert _q(db, "SELECT count(*), count(DISTINCT name) FROM runs") == [(2, 1)]


def _seed_mean(values: list) -> float:
    con = duckdb.connect()
    for st in view_sections(VIEWS.read_text(encoding="utf-8"))["any"]:
        con.execute(st.sql)
    con.execute("CREATE TABLE t (run_id VARCHAR, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(str(i), v) for i, v in enumerate(values)])
    return con.execute("SELECT seed_mean(x, run_id) FROM t").fetchone()[0]


@pytest.mark.parametrize(
    ("values", "want"),
    [
        ([1.7e308, 1.7e308], 1.7e308),  # two seeds of a huge perplexity: "inf (2 seeds)" before
        ([1.0, 2.0, 4.0], 7.0 / 3.0),
        ([3.0, float("inf")], float("inf")),  # a model that explodes keeps its +inf
        ([None, 5.0], 5.0),
    ],
)
def test_the_seed_mean_never_overflows(values, want):
    assert _seed_mean(values) == pytest.approx(want, rel=1e-15)


def test_seeds_of_two_protocols_are_never_one_cell(tmp_path, monkeypatch):
    """Two seeds evaluated under different protocols (targets, documents, skip) were averaged into one cell,
    "2 seeds": the second is refused, naming both protocols."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    d2, ck2 = _copy_checkpoint(tmp_path, results, ck, "tape-seed1", b"seed 1 weights")
    summary = json.loads((ck2 / "train_summary.json").read_text())
    (ck2 / "train_summary.json").write_text(json.dumps({**summary, "seed": 1}))
    doc = json.loads((d2 / "results.json").read_text())
    doc["peeval"]["protocol"]["ppl"] = "fixed targets: 8192 tokens, skip 0, seed 0"
    (d2 / "results.json").write_text(json.dumps(doc))
    with pytest.raises(IngestError, match="protocol"):
        ingest([results, ck, d2, ck2], tmp_path / "a.duckdb")
    db = tmp_path / "b.duckdb"
    ingest([results, ck], db)
    with pytest.raises(IngestError, match="protocol"):
        ingest([d2, ck2], db)
    assert _q(db, "SELECT count(*) FROM runs") == [(1,)]


def _claims_stage():
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("claims_stage", f"{REPO}/pipelines/claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    return stage


def _published_store(tmp_path, name: str, ppl: float):
    """A store holding one published run (profile cpu) of perplexity ``ppl``."""
    from test_published import _local_run

    from leaderboard.publish import publish

    repo = tmp_path / f"repo-{name}"
    repo.mkdir()
    _local_run(repo, ppl)
    import os

    cwd = os.getcwd()
    os.chdir(repo)
    try:
        folder = publish("cpu", "m", out=repo / "published")
        db = tmp_path / name / "peeval.duckdb"
        db.parent.mkdir(exist_ok=True)
        ingest([folder], db)
    finally:
        os.chdir(cwd)
    return db


def test_claims_of_an_unknown_source_are_refused_naming_the_sources(tmp_path, capsys):
    """`pipelines/claims.py --source published/nosuch` (a typo): exit 0, "99 not measured"."""
    db = _published_store(tmp_path, "a", 30.0)
    assert _claims_stage().main(["--db", str(db), "--source", "published/nosuch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'published/nosuch'" in err[0] and "published/cpu" in err[0], err
    assert not db.with_name("claims.duckdb").exists()


def test_the_site_never_shows_the_claims_of_another_store(tmp_path, capsys):
    """`leaderboard.site --db NEW` beside an older store's claims.duckdb: verdicts shown for runs that do not
    exist. The claims database records the store it was computed from; the site refuses another's."""
    from leaderboard.site.build import main as site_main

    db = _published_store(tmp_path, "a", 30.0)
    assert _claims_stage().main(["--db", str(db), "--source", "published/cpu"]) == 0
    assert site_main(["--db", str(db), "--out", str(tmp_path / "site-a")]) == 0  # its own store: built
    new = _published_store(tmp_path, "b", 40.0)  # another store, the older claims.duckdb put beside it
    shutil.copyfile(db.with_name("claims.duckdb"), new.with_name("claims.duckdb"))
    capsys.readouterr()
    assert site_main(["--db", str(new), "--out", str(tmp_path / "site-b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another store" in err[0] and not (tmp_path / "site-b").exists(), err


def test_a_linked_run_folder_is_reported_not_skipped(tmp_path, monkeypatch):
    """A symlinked run folder in a results folder was skipped without a word."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "run2"
    elsewhere.parent.mkdir()
    shutil.move(results, elsewhere)
    results.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(IngestError, match="symbolic link to a folder of runs"):
        ingest([tmp_path / "results", ck], tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()
    ingest([elsewhere, ck], tmp_path / "s.duckdb")  # named itself: read
    assert _q(tmp_path / "s.duckdb", "SELECT count(*) FROM runs") == [(1,)]


def test_a_run_that_measured_nothing_and_a_fifo_samples_file_are_refused(tmp_path, monkeypatch):
    """A run whose every metric is null was ingested as "not run"; a samples file that is a FIFO hung the ingest."""
    import os

    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    good = (results / "results.json").read_text()
    doc = json.loads(good)
    doc["results"] = {t: {k: None for k in m} for t, m in doc["results"].items()}
    (results / "results.json").write_text(json.dumps(doc))
    with pytest.raises(IngestError, match="every metric is null"):
        ingest([results, ck], tmp_path / "s.duckdb")
    (results / "results.json").write_text(good)
    os.mkfifo(results / "samples_peeval_ppl_pg19.jsonl")
    with pytest.raises(IngestError, match="not a regular file"):
        ingest([results, ck], tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()


# ----------------------------------------------------------------------------- aggregates agree with their rows
def _hand_store(tmp_path):
    """A store of one run whose aggregates were worked out by hand in float64 from its rows: perplexity blocks
    (ll -10 over 5 tokens / 20 bytes, ll -6 over 3 / 12: sum ll -16, 8 tokens, 32 bytes, so ppl@64 = e^2, bpb@64 =
    16 / (32 ln 2) = 0.5 / ln 2, tokens@64 = 8), four samples right, right, wrong, right (acc 3/4, n 4), and a
    checkpoint with final_val_loss ln 3 (final_val_ppl 3) whose curve ends at step 10, 5,120 tokens."""
    from leaderboard.store import connect, insert_rows

    con = connect(tmp_path / "hand.duckdb")
    insert_rows(con, "runs", [{"run_id": "r", "name": "rope", "kind": "pretrain", "source": "local",
                               "checkpoint": "ck", "results_path": "results/r/results.json"}])  # fmt: skip
    insert_rows(con, "ppl_blocks", [
        {"run_id": "r", "task": "peeval_ppl_pg19", "doc_id": 0, "length": 64, "ll": -10.0, "tokens": 5, "bytes": 20,
         "protocol": "targets"},
        {"run_id": "r", "task": "peeval_ppl_pg19", "doc_id": 1, "length": 64, "ll": -6.0, "tokens": 3, "bytes": 12,
         "protocol": "targets"}])  # fmt: skip
    insert_rows(con, "samples", [{"run_id": "r", "task": "arc_easy", "doc_id": d, "correct": c}
                                 for d, c in enumerate([True, True, False, True])])  # fmt: skip
    cells = {"ppl@64": math.exp(2.0), "bpb@64": 0.5 / math.log(2.0), "tokens@64": 8.0}
    insert_rows(con, "metrics", [{"run_id": "r", "task": "peeval_ppl_pg19", "metric": m, "filter": "none", "value": v}
                                 for m, v in cells.items()]
                + [{"run_id": "r", "task": "arc_easy", "metric": "acc", "filter": "none", "value": 0.75,
                    "n": 4}])  # fmt: skip
    insert_rows(con, "efficiency", [{"checkpoint": "ck", "pe": "rope", "steps": 10, "tokens": 5120,
                                     "final_val_loss": math.log(3.0), "final_val_ppl": 3.0,
                                     "summary": "{}"}])  # fmt: skip
    insert_rows(con, "training_curves", [{"checkpoint": "ck", "step": s, "tokens": 512 * s} for s in range(1, 11)])
    return con


@pytest.mark.parametrize(
    ("tamper", "named", "k"),
    [
        ("UPDATE metrics SET value = value * 1.001 WHERE metric = 'ppl@64'", "peeval_ppl_pg19 ppl@64 is", 1),
        ("UPDATE metrics SET value = 0.9 WHERE metric = 'bpb@64'", "peeval_ppl_pg19 bpb@64 is 0.9", 1),
        ("UPDATE metrics SET value = 9 WHERE metric = 'tokens@64'", "tokens@64 is 9.0", 1),
        ("UPDATE metrics SET value = 0.8 WHERE metric = 'acc'", "arc_easy acc is 0.8, its 4 samples give 0.75", 1),
        ("UPDATE metrics SET n = 5 WHERE metric = 'acc'", "arc_easy acc counts n=5, its samples 4", 1),
        ("UPDATE efficiency SET final_val_ppl = 3.1", "final_val_ppl is 3.1", 1),
        ("UPDATE efficiency SET steps = 11", "11 steps / 5120 tokens, its training curve ends at step 10", 1),
        # a row changed under its aggregates: ll -17 over 8 tokens, 32 bytes (bpb@64 = 17 / (32 ln 2), ppl@64 too)
        (
            "UPDATE ppl_blocks SET ll = -7 WHERE doc_id = 1",
            f"bpb@64 is {0.5 / math.log(2.0)!r}, its documents' blocks give {17 / (32 * math.log(2.0))!r}",
            2,
        ),
    ],
)
def test_an_aggregate_is_recomputed_from_its_rows(tmp_path, tamper, named, k):
    """Issue 56 item 4: every aggregate the store holds (a perplexity cell, an outcome share and its n, a
    checkpoint's final perplexity, steps and tokens) agrees with the rows it summarises; one tampered row is named."""
    from leaderboard.store import StoreError, aggregate_mismatches, check_aggregates

    con = _hand_store(tmp_path)
    assert aggregate_mismatches(con) == []
    con.execute(tamper)
    bad = aggregate_mismatches(con)
    assert len(bad) == k and named in bad[0], bad
    assert aggregate_mismatches(con, run_ids=["other"], checkpoints=["other"]) == []  # only the rows asked for
    with pytest.raises(StoreError, match="disagrees with the rows it summarises") as e:
        check_aggregates(con, "--db x", checkpoints=None)
    assert "\n" not in str(e.value)
    con.close()


def _run_with_samples(tmp_path, scale: float):
    """The smoke TAPE run with the published run's perplexity samples beside it: its ppl@L ``scale`` times theirs."""
    from test_sources import PUBLISHED_CPU, TAPE

    results, ck = _smoke_tape(tmp_path, scale=scale)
    shutil.copyfile(PUBLISHED_CPU / TAPE.replace("results.json", "samples_peeval_ppl_pg19.jsonl"),
                    results / "samples_peeval_ppl_pg19.jsonl")  # fmt: skip
    return results, ck


def test_ingest_refuses_a_run_whose_numbers_are_not_its_samples(tmp_path, monkeypatch):
    """A results.json whose perplexities were edited (x 1.25) beside the samples it was computed from was stored
    and shown: now one line naming the run and the cell, and no store."""
    monkeypatch.chdir(tmp_path)
    results, ck = _run_with_samples(tmp_path, scale=1.25)
    with pytest.raises(IngestError, match=r"smoke-tape/results.json: peeval_ppl_pg19 ppl@\d+ is .*blocks give") as e:
        ingest([results, ck], tmp_path / "s.duckdb")
    assert "\n" not in str(e.value) and "nothing was written" in str(e.value)
    assert not (tmp_path / "s.duckdb").exists()


def test_the_site_refuses_a_store_whose_aggregate_was_tampered(tmp_path, monkeypatch, capsys):
    """A store edited after ingest (one ppl cell) was built into a site that showed it: one line, exit 2, no site."""
    from leaderboard.site.build import main as site_main

    monkeypatch.chdir(tmp_path)
    results, ck = _run_with_samples(tmp_path, scale=1.0)
    db = tmp_path / "s.duckdb"
    ingest([results, ck], db)  # its own numbers: stored
    con = duckdb.connect(str(db))
    con.execute("UPDATE metrics SET value = value * 2 WHERE metric = (SELECT min(metric) FROM metrics "
                "WHERE metric LIKE 'ppl@%')")  # fmt: skip
    con.close()
    capsys.readouterr()
    assert site_main(["--db", str(db), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "disagrees with the rows it summarises" in err[0] and "ppl@" in err[0], err
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("profile", ["cpu", "cpu-claims"])
def test_the_published_stores_agree_with_themselves(tmp_path, profile):
    """The published stores (`make site`'s ingest) pass the check, and the board's means over seeds and its seed
    counts ("3 seeds") are the float64 means and counts of the per-run rows of the metrics table."""
    from conftest import REPO

    from leaderboard.site.context import SiteStore
    from leaderboard.site.stats import board
    from leaderboard.store import aggregate_mismatches

    db = tmp_path / "s.duckdb"
    ingest([f"{REPO}/leaderboard/published/{profile}"], db, root=tmp_path)  # runs the check on every run written
    con = duckdb.connect(str(db), read_only=True)
    assert aggregate_mismatches(con) == []
    checked, store = 0, SiteStore(con)
    for kind in ("pretrain", "diagnostic"):
        b = board(store, (kind,))
        for name, by in b.stats.items():
            for label, est in by.items():
                task, metric = b.chosen[label]
                per_run = [v for (v,) in con.execute(
                    "SELECT m.value FROM metrics m JOIN runs r USING (run_id) WHERE r.name = ? AND r.kind = ? "
                    "AND m.task = ? AND m.metric = ? AND m.filter = 'none' AND m.value IS NOT NULL",
                    [name, kind, task, metric]).fetchall()]  # fmt: skip
                assert est.seeds == len(per_run), (name, label)
                assert est.value == pytest.approx(math.fsum(per_run) / len(per_run), rel=1e-12), (name, label)
                checked += 1
    assert checked > 50 and any(est.seeds >= 3 for by in b.stats.values() for est in by.values())
    con.close()
