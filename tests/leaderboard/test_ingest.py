"""DuckDB ingest: the '@' metric names land in the per-cell tables, ingest is idempotent, and a
malformed or partial file is rejected with its name while the database stays as it was."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

from leaderboard.ingest import IngestError, ingest, main  # noqa: E402

TABLES = ("runs", "metrics", "ppl_by_length", "passkey_cells", "diagnostic_cells", "samples", "training_curves",
          "efficiency")  # fmt: skip


def write_checkpoint(d: Path, pe="tape", task=None, pe_options=None):
    d.mkdir(parents=True)
    (d / "train_summary.json").write_text(json.dumps({
        "pe": pe, "pe_options": pe_options or {}, "task": task, "profile": "smoke", "seed": 3, "params": 12345,
        "steps": 2, "tokens": 256, "train_time_s": 1.5, "tokens_per_s": 170.7, "flops_per_token": 74070.0,
        "final_val_loss": 5.0, "final_val_ppl": 148.4, "training_length": 64,
    }))  # fmt: skip
    (d / "train_curve.csv").write_text(
        "step,tokens,lr,train_loss,val_loss,elapsed_s\n1,128,0.001,6.0,,0.7\n2,256,0.0005,5.5,5.0,1.5\n"
    )


def write_results(d: Path, ckpt: Path, results: dict, samples: dict, n_samples: dict):
    d.mkdir(parents=True)
    doc = {
        "results": results,
        "n-samples": n_samples,
        "peeval": {"peeval_version": "0.1.0", "git_commit": "abc", "model": "peeval",
                   "model_args": {"pretrained": str(ckpt)}, "checkpoint": str(ckpt), "pe": "tape", "pe_options": {},
                   "training_length": 64, "max_length": 256, "protocol": {"ppl": "disjoint windows", "metadata": {}},
                   "dtype": "torch.float32", "seed": 0, "versions": {"lm_eval": "0.4.13", "torch": "2.13.0"},
                   "date": "2026-11-22T22:22:27+00:00"},
    }  # fmt: skip
    (d / "results.json").write_text(json.dumps(doc))
    for task, rows in samples.items():
        (d / f"samples_{task}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def passkey_sample(i, length, depth, hit):
    m = f"acc@{length}@{depth}"
    return {"doc_id": i, "target": "123", "arguments": [[f"prompt <b>{i}</b>", {}]], "filtered_resps": ["123" if hit
            else "9"], "filter": "none", "metrics": ["acc", m], "acc": float(hit), m: float(hit)}  # fmt: skip


@pytest.fixture
def tree(tmp_path):
    """results/{lm,diag}/ + checkpoints/{tape,diag} under tmp_path, values chosen by hand."""
    ck, dk = tmp_path / "checkpoints" / "tape", tmp_path / "checkpoints" / "tape-addition"
    write_checkpoint(ck)
    write_checkpoint(dk, task="addition")
    # passkey: 3 documents in cell (64, 0.0) of which 2 right, 1 document in (64, 1.0), wrong
    samples = [passkey_sample(0, 64, 0.0, True), passkey_sample(1, 64, 1.0, False), passkey_sample(2, 64, 0.0, True),
               passkey_sample(3, 64, 0.0, False)]  # fmt: skip
    results = {
        "peeval_passkey": {"acc,none": 0.5, "acc_stderr,none": 0.2887, "acc@64@0.0,none": 2 / 3,
                           "acc@64@0.0_stderr,none": "N/A", "acc@64@1.0,none": 0.0, "acc@64@1.0_stderr,none": "N/A"},
        "peeval_ppl_pg19": {"ppl@32,none": 411.5, "ppl@32_stderr,none": "N/A", "bpb@32,none": 3.79,
                            "tokens@32,none": 62, "windows@32,none": 2, "ppl@64,none": float("inf"),
                            "bpb@64,none": 9.5, "tokens@64,none": 126, "windows@64,none": 2},
    }  # fmt: skip
    n_samples = {"peeval_passkey": {"original": 10, "effective": 4}, "peeval_ppl_pg19": {"effective": 2}}
    write_results(tmp_path / "results" / "lm", ck, results, {"peeval_passkey": samples}, n_samples)
    diag = {
        "peeval_diag_addition_test": {"acc,none": 0.25, "acc@1x2,none": 0.5, "acc@3x3,none": 0.0},
        "peeval_diag_flip_flop_ood_sparse": {"acc,none": 0.5, "read_acc,none": 0.75, "seq_acc,none": 0.125},
    }
    write_results(tmp_path / "results" / "diag", dk, diag, {}, {"peeval_diag_addition_test": {"effective": 4}})
    return tmp_path


def dump(db: Path) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: sorted(map(repr, con.execute(f"select * from {t}").fetchall())) for t in TABLES}
    finally:
        con.close()


def test_cells_parsed_from_metric_names(tree):
    db = tree / "p.duckdb"
    ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    con = duckdb.connect(str(db))
    assert con.execute("select length, depth, acc, n from passkey_cells order by depth").fetchall() == [
        (64, 0.0, pytest.approx(2 / 3), 3),
        (64, 1.0, 0.0, 1),
    ]
    ppl = con.execute("select corpus, length, ppl, bpb, tokens, windows from ppl_by_length order by length").fetchall()
    assert ppl[0] == ("pg19", 32, 411.5, 3.79, 62, 2) and ppl[1][:2] == ("pg19", 64) and math.isinf(ppl[1][2])
    ff = "select split, cell, acc from diagnostic_cells where task = 'flip_flop' order by cell"
    assert con.execute(ff).fetchall() == [("ood_sparse", "all", 0.5), ("ood_sparse", "read_acc", 0.75),
                                          ("ood_sparse", "seq_acc", 0.125)]  # fmt: skip
    q = "select task, split, cell, len_a, len_b, acc from diagnostic_cells where task = 'addition' order by cell"
    cells = con.execute(q).fetchall()
    assert cells == [("addition", "test", "1x2", 1, 2, 0.5), ("addition", "test", "3x3", 3, 3, 0.0),
                     ("addition", "test", "all", None, None, 0.25)]  # fmt: skip
    kinds = dict(con.execute("select kind, checkpoint from runs").fetchall())
    assert kinds == {"pretrain": "checkpoints/tape", "diagnostic": "checkpoints/tape-addition"}
    assert con.execute("select diag_task, seed, training_length from runs where kind='diagnostic'").fetchone() == (
        "addition", 3, 64)  # fmt: skip
    assert con.execute("select stderr, n from metrics where metric='acc' and task='peeval_passkey'").fetchone() == (
        0.2887, 4)  # fmt: skip
    assert con.execute("select stderr from metrics where metric='ppl@32'").fetchone() == (None,)
    curve = con.execute("select step, val_loss from training_curves where checkpoint='checkpoints/tape' order by step")
    assert curve.fetchall() == [(1, None), (2, 5.0)]
    assert con.execute("select count(*) from efficiency").fetchone() == (2,)
    assert con.execute("select response, correct from samples where doc_id=1").fetchone() == ("9", False)


def test_ingest_twice_gives_the_same_rows(tree):
    db = tree / "p.duckdb"
    ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    first = dump(db)
    ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    ingest([tree / "results" / "lm"], db, root=tree)
    assert dump(db) == first and len(first["runs"]) == 2 and len(first["samples"]) == 4


def test_a_rerun_replaces_the_old_run_of_the_same_results_path(tree):
    db = tree / "p.duckdb"
    ingest([tree / "results"], db, root=tree)
    f = tree / "results" / "lm" / "results.json"
    doc = json.loads(f.read_text())
    doc["results"]["peeval_passkey"]["acc_stderr,none"] = 0.25  # a rerun (its acc is its samples': 2 of 4)
    f.write_text(json.dumps(doc))
    ingest([tree / "results"], db, root=tree)
    con = duckdb.connect(str(db))
    assert con.execute("select count(*) from runs").fetchone() == (2,)
    q = (
        "select stderr from metrics join runs using (run_id) where task='peeval_passkey' and metric='acc' "
        "and source='local'"
    )
    assert con.execute(q).fetchall() == [(0.25,)]


@pytest.mark.parametrize(
    "damage, named",
    [
        (lambda t: (t / "results/diag/results.json").write_text('{"results": {"peeval_diag_addition_test": {"ac'),
         "results/diag/results.json"),
        (lambda t: (t / "results/diag/results.json").write_text('{"results": {}}'), "results/diag/results.json"),
        (lambda t: (t / "results/lm/samples_peeval_passkey.jsonl").open("a").write('{"doc_id": 9, "targ'),
         "samples_peeval_passkey.jsonl:5"),
        (lambda t: (t / "checkpoints/tape/train_curve.csv").open("a").write("3,300\n"), "tape/train_curve.csv"),
        (lambda t: (t / "results/diag/results.json").write_text(
            (t / "results/diag/results.json").read_text().replace("0.25", '"high"')), "results/diag/results.json"),
    ],
)  # fmt: skip
def test_malformed_input_is_rejected_and_the_database_untouched(tree, damage, named):
    db = tree / "p.duckdb"
    ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    before = dump(db)
    # a new, good run next to the damaged file must not land either: all or nothing
    shutil.copytree(tree / "results" / "lm", tree / "results" / "lm2")
    lm2 = tree / "results/lm2/results.json"
    lm2.write_text(lm2.read_text().replace("0.5", "0.6"))
    damage(tree)
    with pytest.raises(IngestError, match=named.replace(".", r"\.")):
        ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    assert dump(db) == before


def test_malformed_input_creates_no_database(tree, capsys):
    (tree / "results/lm/results.json").write_text("{")
    db = tree / "new.duckdb"
    assert main(["--db", str(db), "--root", str(tree), str(tree / "results")]) == 2
    assert "results/lm/results.json" in capsys.readouterr().err and not db.exists()


def test_duckdb_cli_reads_the_store(tree):
    cli = Path(sys.executable).parent / "duckdb"
    if not cli.exists():
        pytest.skip("duckdb CLI (PyPI duckdb-cli) not installed")
    db = tree / "p.duckdb"
    ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    r = subprocess.run([str(cli), "-csv", str(db), "select name, kind from runs order by kind"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["name,kind", "tape,diagnostic", "tape,pretrain"]


# ----------------------------------------------------------------------------- bad values and a safe store


def _set_result(t: Path, run: str, task: str, key: str, value) -> None:
    f = t / "results" / run / "results.json"
    doc = json.loads(f.read_text())
    doc["results"][task][key] = value
    f.write_text(json.dumps(doc))  # NaN / Infinity are written as JSON's NaN / Infinity, which json reads back


@pytest.mark.parametrize(
    "run, task, key, value, why",
    [
        ("lm", "peeval_passkey", "acc,none", 1.5, "not an accuracy in [0, 1]"),
        ("lm", "peeval_passkey", "acc@64@0.0,none", -0.25, "not an accuracy in [0, 1]"),
        ("diag", "peeval_diag_flip_flop_ood_sparse", "seq_acc,none", float("nan"), "not a finite number"),
        ("diag", "peeval_diag_addition_test", "acc,none", float("inf"), "not a finite number"),
        ("lm", "peeval_ppl_pg19", "ppl@32,none", -411.5, "not a perplexity"),
        ("lm", "peeval_ppl_pg19", "ppl@32,none", 0.5, "not a perplexity"),
        ("lm", "peeval_ppl_pg19", "ppl@32,none", float("nan"), "not a finite number"),
        ("lm", "peeval_ppl_pg19", "bpb@32,none", -1.0, "bits-per-byte"),
        ("lm", "peeval_ppl_pg19", "tokens@32,none", 2.5, "not a count"),
        ("lm", "peeval_passkey", "acc_stderr,none", float("nan"), "stderr"),
        ("lm", "peeval_ppl_pg19", "ppl@0,none", 12.0, "length must be a whole number >= 2"),  # issue 30
        ("lm", "peeval_ppl_pg19", "ppl@-3,none", 12.0, "length must be a whole number >= 2"),
        ("lm", "peeval_ppl_pg19", "bpb@1,none", 1.0, "length must be a whole number >= 2"),
        ("lm", "peeval_ppl_pg19", "windows@32,none", 2**70, "fits a 64-bit integer"),
    ],
)  # fmt: skip
def test_impossible_metric_values_are_rejected_naming_file_and_cell(tree, capsys, run, task, key, value, why):
    db = tree / "p.duckdb"
    ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    before = dump(db)
    _set_result(tree, run, task, key, value)
    assert main(["--db", str(db), "--root", str(tree), str(tree / "results"), str(tree / "checkpoints")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"results/{run}/results.json" in err[0] and why in err[0], err
    assert f"[{task!r}][{key!r}]" in err[0], err
    assert dump(db) == before


def test_exploded_perplexity_and_edge_values_are_kept(tree):
    """+inf ppl is the perplexity task's documented 'model exploded' value; 1.0 and 0/1 accuracies are valid."""
    _set_result(tree, "lm", "peeval_ppl_pg19", "ppl@32,none", 1.0)
    _set_result(tree, "diag", "peeval_diag_addition_test", "acc,none", 1)  # (passkey's acc is its samples')
    db = tree / "p.duckdb"
    ingest([tree / "results"], db, root=tree)
    con = duckdb.connect(str(db))
    got = dict(con.execute("select length, ppl from ppl_by_length").fetchall())
    assert got[32] == 1.0 and math.isinf(got[64])


@pytest.mark.parametrize(
    "damage, named",
    [
        # a sample whose doc_id is not a number: before, a bare ValueError naming no file
        (lambda t: (t / "results/lm/samples_peeval_passkey.jsonl").open("a").write('{"doc_id": "abc"}\n'),
         "samples_peeval_passkey.jsonl:5: malformed sample ('doc_id'"),
        # provenance: seed, n-samples, model_args of the wrong type
        (lambda t: _edit(t / "results/lm/results.json", lambda d: d["peeval"].update(max_length="long")),
         "results/lm/results.json: peeval.max_length: expected a whole number, got 'long'"),
        (lambda t: _edit(t / "results/lm/results.json", lambda d: d.update({"n-samples": [1, 2]})),
         "results/lm/results.json: n-samples must be an object"),
        (lambda t: _edit(t / "results/lm/results.json", lambda d: d["peeval"].update(model_args="pretrained=x")),
         "results/lm/results.json: peeval.model_args must be an object"),
        (lambda t: _set_result(t, "lm", "peeval_passkey", "acc@sixty@0.0,none", 0.5),
         "results/lm/results.json: results['peeval_passkey']['acc@sixty@0.0,none']: the length"),
        (lambda t: _set_result(t, "lm", "peeval_passkey", "acc@64@1.8,none", 0.5),
         "results/lm/results.json: results['peeval_passkey']['acc@64@1.8,none']: the depth"),
        # training outputs: a NaN loss, a ppl below 1, a non-numeric step, a summary that is not an object
        (lambda t: (t / "checkpoints/tape/train_curve.csv").open("a").write("3,384,0.0001,nan,5.0,2.0\n"),
         "tape/train_curve.csv: malformed training curve (line 4, column 'train_loss'"),
        (lambda t: (t / "checkpoints/tape/train_curve.csv").open("a").write("x,384,0.0001,5.0,5.0,2.0\n"),
         "tape/train_curve.csv: malformed training curve (line 4, column 'step'"),
        (lambda t: _edit(t / "checkpoints/tape/train_summary.json", lambda d: d.update(final_val_ppl=0.5)),
         "tape/train_summary.json: 'final_val_ppl'"),
        (lambda t: _edit(t / "checkpoints/tape/train_summary.json", lambda d: d.update(tokens_per_s=float("nan"))),
         "tape/train_summary.json: 'tokens_per_s'"),
        (lambda t: (t / "checkpoints/tape/train_summary.json").write_text("[1, 2]"),
         "tape/train_summary.json: not a JSON object"),
        # a copied results folder: the same run twice (before: a DuckDB constraint error, no file named)
        (lambda t: shutil.copytree(t / "results/lm", t / "results/lm-copy"),
         "results/lm-copy/results.json: the same"),
    ],
)  # fmt: skip
def test_every_parse_error_names_the_file(tree, capsys, damage, named):
    db = tree / "p.duckdb"
    ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    before = dump(db)
    damage(tree)
    with pytest.raises(IngestError) as e:
        ingest([tree / "results", tree / "checkpoints"], db, root=tree)
    assert named in str(e.value), str(e.value)
    assert dump(db) == before
    assert main(["--db", str(db), "--root", str(tree), str(tree / "results"), str(tree / "checkpoints")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0]


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_a_database_path_that_is_not_a_database_is_one_line(tree, capsys):
    db = tree / "notes.txt"
    db.write_text("not a database\n")
    assert main(["--db", str(db), "--root", str(tree), str(tree / "results")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "notes.txt: cannot open as a DuckDB database" in err[0]
    assert db.read_text() == "not a database\n"


def _stage(cwd: Path) -> subprocess.CompletedProcess:
    """pipelines/ingest.py as DVC runs it: from the repository root (here a copy of its layout)."""
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(Path(REPO) / "pipelines" / "ingest.py")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.fixture
def layout(tree):
    """The pipeline's folders (results/, checkpoints/pretrain, checkpoints/diag, leaderboard/) under tree."""
    (tree / "checkpoints" / "pretrain").mkdir()
    (tree / "checkpoints" / "diag").mkdir()
    (tree / "checkpoints" / "tape").rename(tree / "checkpoints" / "pretrain" / "tape")
    (tree / "checkpoints" / "tape-addition").rename(tree / "checkpoints" / "diag" / "tape-addition")
    for run in ("lm", "diag"):
        f = tree / "results" / run / "results.json"
        f.write_text(f.read_text().replace("checkpoints/tape", "checkpoints/pretrain/tape"))
    (tree / "leaderboard").mkdir()
    return tree


def test_stage_keeps_the_old_store_when_an_input_is_bad(layout):
    """Before: the stage deleted leaderboard/peeval.duckdb first, so one bad file lost the whole store."""
    db = layout / "leaderboard" / "peeval.duckdb"
    r = _stage(layout)
    assert r.returncode == 0, r.stderr
    before = dump(db)
    con = duckdb.connect(str(db), read_only=True)  # beside the repository's committed published results
    local = con.execute("select count(*) from runs where source = 'local'").fetchone()[0]
    local_ck = con.execute("select count(*) from efficiency where checkpoint not like '%published/%'").fetchone()[0]
    con.close()
    assert local == 2 and local_ck == 2
    _set_result(layout, "lm", "peeval_passkey", "acc,none", 1.5)
    r = _stage(layout)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "results/lm/results.json" in lines[0] and "accuracy" in lines[0], r.stderr
    assert dump(db) == before
    assert sorted(p.name for p in (layout / "leaderboard").iterdir()) == ["peeval.duckdb"]  # no temporary left
    _set_result(layout, "lm", "peeval_passkey", "acc,none", 0.5)  # fixed (its samples' 2 of 4) ...
    _set_result(layout, "lm", "peeval_passkey", "acc_stderr,none", 0.25)  # ... and rerun: the store is replaced
    r = _stage(layout)
    assert r.returncode == 0, r.stderr
    con = duckdb.connect(str(db), read_only=True)
    q = (
        "select value, stderr from metrics join runs using (run_id) where task='peeval_passkey' and metric='acc' "
        "and source='local'"
    )
    assert con.execute(q).fetchall() == [(0.5, 0.25)]
    con.close()
    assert sorted(p.name for p in (layout / "leaderboard").iterdir()) == ["peeval.duckdb"]


def test_a_samples_per_document_scores_are_kept_beside_its_outcome():
    """SCROLLS' QMSum sample: rouge1/2/L per document go to samples.scores (what Rgm's paired bootstrap reads); the
    lists (rouge_gm's triple), the 0/1 outcome and other per-document values stay out; a sample without them has
    none, and a ROUGE outside [0, 1] is refused."""
    from leaderboard.ingest import _sample_row

    s = {"doc_id": 3, "target": "t", "resps": [["r"]], "metrics": ["rouge1", "rouge2", "rougeL", "rouge_gm", "em"],
         "rouge1": 0.25, "rouge2": 0.0, "rougeL": 0.2, "rouge_gm": [0.25, 0.0, 0.2], "em": 1.0}  # fmt: skip
    row, _ = _sample_row(s, "peeval_scrolls_qmsum", "r0")
    assert json.loads(row["scores"]) == {"rouge1": 0.25, "rouge2": 0.0, "rougeL": 0.2}
    assert row["correct"] is True
    row, _ = _sample_row({"doc_id": 0, "acc": 0.0, "acc@1x1": 0.0}, "peeval_diag_addition_test", "r0")
    assert row["scores"] is None and row["correct"] is False
    with pytest.raises(ValueError, match="'rouge1'"):
        _sample_row({**s, "rouge1": 25.0}, "peeval_scrolls_qmsum", "r0")


def test_the_summary_line_gives_the_store_total_beside_what_this_ingest_wrote(tree, capsys):
    """Issue 68: "runs 71" for a store of 72 read as a lost run; the line says both numbers."""
    db = tree / "p.duckdb"
    ingest([tree / "results" / "lm"], db, root=tree)
    capsys.readouterr()
    assert main(["--db", str(db), "--root", str(tree), str(tree / "results" / "diag")]) == 0
    line = capsys.readouterr().out.strip()
    assert "wrote runs 1," in line and line.endswith("the store now holds 2 runs"), line
