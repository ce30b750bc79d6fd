"""The whole pipeline on the `smoke` profile in a copy of the repository (offline, no git or
DVC remote), as `make leaderboard` runs it (pipelines/repro.py, two stages at once): data -> tokenizer
-> train -> diagnostics -> adapt -> eval -> ingest -> claims -> site; then a plain `dvc repro` is a
no-op (the runner's dvc.lock is DVC's own), changing one encoding's parameters invalidates only
that encoding's stage, and the built site passes the browser checks of test_site."""

import json
import shutil
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import REPO
from helpers import store_rows
from helpers.browser import check_in_browser
from helpers.data_mirror import BIN, MIRROR, needs_mirror, sh
from helpers.worktree import copy_working_tree


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """A copy of the working tree (what a fresh clone has) with the smoke pipeline reproduced."""
    work = tmp_path_factory.mktemp("smoke") / "repo"
    copy_working_tree(work)
    for published in (work / "leaderboard" / "published").iterdir():  # the committed profiles: test_published's
        if published.is_dir():
            shutil.rmtree(published)
    sh([str(BIN / "dvc"), "config", "--local", "core.no_scm", "true"], work)  # the copy is not a git repository
    sh([sys.executable, "pipelines/use_profile.py", "smoke"], work)
    params = work / "params.yaml"  # the copy has no ../shared/data beside it: point data.root at the mirror
    params.write_text(params.read_text().replace("root: ../shared/data", f"root: {MIRROR.resolve()}", 1))
    t0 = time.perf_counter()
    log = sh([sys.executable, "pipelines/repro.py", "--jobs", "2"], work)
    return work, log, time.perf_counter() - t0


@needs_mirror("local", "gutenberg-train")
def test_smoke_pipeline_end_to_end(smoke):
    work, log, wall = smoke
    p = yaml.safe_load((work / "params.yaml").read_text())
    print(f"smoke pipeline (repro.py --jobs 2): {wall:.0f} s")
    for stage in ("data", "tokenizer", "ingest", "claims", "site", *(f"train@{e}" for e in p["encodings"])):
        assert f"done    '{stage}'" in log, stage
    assert "Data and pipelines are up to date" in log  # the runner's closing `dvc repro` had nothing left
    con = duckdb.connect(str(work / "leaderboard" / "peeval.duckdb"), read_only=True)
    local = "select run_id from runs where source = 'local'"  # beside them: the committed published results
    q = f"select distinct name from runs where kind = 'pretrain' and run_id in ({local})"
    names = {r[0] for r in con.execute(q).fetchall()}
    controls = {n for n in names if n.endswith(" untrained (step 0)")}  # issue 67: each run's step-0 control
    assert names - controls == set(p["encodings"])
    assert controls == {f"{e} untrained (step 0)" for e in p["encodings"]}
    q = f"select distinct length from ppl_by_length where run_id in ({local})"
    lengths = {r[0] for r in con.execute(q).fetchall()}
    assert lengths == set(p["eval"]["suites"]["lm"]["metadata"]["lengths"])
    assert con.execute("select count(*) from passkey_cells").fetchone()[0] > 0
    assert con.execute("select count(*) from training_curves").fetchone()[0] > 0
    if any(r["task"] == "addition" for r in p["diagnostics"]["runs"].values()):
        assert con.execute("select count(*) from diagnostic_cells where task = 'addition'").fetchone()[0] > 1
    adapt_runs = con.execute("select name from runs where kind = 'adapt' and source = 'local'").fetchall()  # + base
    assert len(adapt_runs) == len(p["adapt"]["methods"]) * len(p["eval"]["adapt"]) + len(p["eval"]["base"])
    shipped = {"SmolLM2-135M-Instruct (GGUF Q4_1) as shipped"} if p["eval"]["base"] else set()
    adapted = {f"SmolLM2-135M-Instruct (GGUF Q4_1) + {m}" for m in p["adapt"]["methods"]}
    assert {r[0] for r in adapt_runs} == adapted | shipped
    con.close()
    claims = duckdb.connect(str(work / "leaderboard" / "claims.duckdb"), read_only=True)  # the claims stage's own file
    assert claims.execute("select count(*) from claims").fetchone()[0] > 40
    claims.close()
    headline = json.loads((work / "leaderboard" / "metrics.json").read_text())
    assert set(p["encodings"]) <= set(headline)
    out = sh([str(BIN / "dvc"), "metrics", "show", "--json"], work)
    assert "passkey_acc" in out


#: the smoke store, row for row (tests/helpers/store_rows.py: what may differ between two runs is taken out)
REFERENCE = Path(__file__).parent / "data" / "smoke_store.json"


@needs_mirror("local", "gutenberg-train")
def test_smoke_store_row_for_row(smoke):
    """A refactor changes no number, on any CPU: the smoke pipeline's store (and claims file) equals the reference
    as any machine must reproduce it (issue 40). Compared exactly: every table's rows (their count, keys, runs,
    tasks, metric names, cells, token totals and every other integer or string). Compared to a tolerance: floats,
    per table (store_rows.CROSS_CPU_RTOL), set from the largest spread measured between torch's CPU kernel paths
    (ATEN_CPU_CAPABILITY=default / avx2 / avx512, 1 and 2 threads) with a margin: trained weights differ in their
    last bits between CPUs (summation order, vector width). Not compared: the greedy generations of the smoke's
    near-untrained models and checkpoint sha256s (store_rows.MACHINE_BOUND), which one CPU alone reproduces; the
    same-machine test below compares those bit for bit. A deliberate change of numbers or rows regenerates the
    reference, and the git diff shows which rows moved:
        python tests/helpers/store_rows.py <smoke run>/leaderboard tests/pipeline/data/smoke_store.json"""
    work, _, _ = smoke
    problems = store_rows.cross_cpu_diff(store_rows.read(REFERENCE), store_rows.dump(work / "leaderboard"))
    assert not problems, f"{len(problems)} differences from {REFERENCE.name}:\n" + "\n".join(problems[:30])


#: what a rerun rewrites with the time it ran (compared through the store's rows instead, volatile columns out)
TIMED = {"train_summary.json", "adapt_summary.json", "train_curve.csv", ".peeval-manifest.json"}  # the manifest
# holds the sha256 of the timed files


def _same_bits(a: Path, b: Path) -> list[str]:
    """Checkpoints byte for byte (weights, configs, tokenizers) and both stores row for row with rtol = atol = 0."""
    problems = []
    files = sorted(f.relative_to(a) for f in (a / "checkpoints").rglob("*") if f.is_file() and f.name not in TIMED)
    assert any(f.name == "model.safetensors" for f in files)
    for rel in files:
        if not (b / rel).is_file() or (a / rel).read_bytes() != (b / rel).read_bytes():
            problems.append(f"{rel}: differs")
    rows_a, rows_b = store_rows.dump(a / "leaderboard"), store_rows.dump(b / "leaderboard")
    return problems + store_rows.diff(rows_a, rows_b, rtol=0.0, atol=0.0)


def _rerun(work: Path, dest: Path, stages: list[str], edit=None) -> Path:
    shutil.copytree(work, dest, symlinks=True)
    if edit:
        edit(dest / "params.yaml")
    sh([str(BIN / "dvc"), "repro", "--force", *stages], dest)
    return dest


#: the stages a same-machine rerun repeats: a pretraining, a diagnostic training, their evaluations, the shift
#: measurement, and everything downstream (ingest, claims, site); the adapter's GGUF stages (55 s) stay out
RERUN = ["--downstream", "train@tape", "diagnostics@tape-addition-0"]


@needs_mirror("local", "gutenberg-train")
def test_same_machine_same_bits(smoke, tmp_path):
    """Reproducible on one machine means bit for bit (issue 40): the smoke pipeline's training, diagnostics,
    evaluation, ingest and claims stages run again with the same settings give byte-identical checkpoints and
    stores whose every value (floats with no tolerance, generations, checkpoint hashes) equals the first run's
    (dates, run ids and timings aside: store_rows.VOLATILE). A tolerance would hide nondeterminism; this does not."""
    work, _, _ = smoke
    again = _rerun(work, tmp_path / "again", RERUN)
    log = (again / "dvc.lock").read_text()
    assert "train@tape" in log
    problems = _same_bits(work, again)
    assert not problems, f"{len(problems)} differences between two runs on one machine:\n" + "\n".join(problems[:30])


@needs_mirror("local", "gutenberg-train")
def test_same_bits_sees_a_changed_seed(smoke, tmp_path):
    """The same-machine check can fail: one stage rerun with another seed gives other weights, and it says so."""
    work, _, _ = smoke

    def seed_1(params: Path):
        p = yaml.safe_load(params.read_text())
        p["encodings"]["tape"]["seed"] = 1  # the stage's own seed (pipeline_params: Encoding.seed)
        params.write_text(yaml.safe_dump(p, sort_keys=False))

    other = _rerun(work, tmp_path / "seed1", ["--single-item", "train@tape"], edit=seed_1)
    problems = _same_bits(work, other)
    assert any(p.startswith("checkpoints/pretrain/tape/model.safetensors") for p in problems), problems


@needs_mirror("local", "gutenberg-train")
def test_second_repro_is_a_noop_and_one_encoding_reruns_alone(smoke):
    work, _, _ = smoke
    t0 = time.perf_counter()
    log = sh([str(BIN / "dvc"), "repro"], work)
    ran = [line for line in log.splitlines() if line.startswith("Running stage")]
    assert ran == [], ran
    assert "Data and pipelines are up to date" in log
    assert time.perf_counter() - t0 < 60
    params = work / "params.yaml"
    p = yaml.safe_load(params.read_text())
    p["encodings"]["rope"]["set"] = {"lr": 0.002}
    params.write_text(yaml.safe_dump(p, sort_keys=False))
    status = json.loads(sh([str(BIN / "dvc"), "status", "--json"], work).strip().splitlines()[-1])
    assert set(status) == {"train@rope"}, status
    assert "encodings.rope" in json.dumps(status["train@rope"])


@needs_mirror("local", "gutenberg-train")
def test_site_of_the_smoke_run_in_chromium(smoke, tmp_path):
    work, _, _ = smoke
    p = yaml.safe_load((work / "params.yaml").read_text())
    index = work / "leaderboard" / "public" / "index.html"
    shot = tmp_path / "smoke_site.png"
    # a row per encoding: the untrained step-0 controls (issue 67) have a band of their own (site/controls.py)
    check_in_browser(index, len(p["encodings"]), shot, diagnostics=bool(p["diagnostics"]["runs"]))
    if Path("/tmp/pipeline").is_dir():
        shutil.copy(shot, "/tmp/pipeline/site.png")


def test_profiles_are_consistent():
    """params.yaml is the cpu profile (generated from params/cpu.yaml: test_profiles_typed checks it); every
    parameter file passes the stages' own check (pipeline_params: known encodings, tasks, suites, adapt
    methods, distinct seeds, ...)."""
    from pipeline_params import load

    root = Path(REPO)
    _, typed = load(root / "params.yaml")
    assert typed.profile == "cpu"
    keys = None
    for name in ("smoke", "cpu", "paper"):
        p, _ = load(root / "params" / f"{name}.yaml")
        assert p["profile"] == name
        assert keys in (None, set(p)), name
        keys = set(p)
        watched = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]["data"]["deps"]
        assert {f"${{data.root}}/{rel}" for rel in p["data"]["mirror"]} <= set(watched), name  # DVC watches them


def test_cpu_claims_extends_cpu_without_rerunning_it():
    """`cpu-claims` only adds to `cpu`: every section a cpu stage reads as a DVC parameter is the same
    (e.g. diagnostics.train: a different task_set would rerun the cpu flip-flop runs on a switch), and
    every cpu encoding / diagnostics run is kept unchanged."""
    from pipeline_params import load

    root = Path(REPO)
    assert yaml.safe_load((root / "params" / "cpu-claims.yaml").read_text())["extends"] == "cpu"  # not a copy
    cpu, _ = load(root / "params" / "cpu.yaml")
    claims, _ = load(root / "params" / "cpu-claims.yaml")  # composed: cpu with the file merged on top
    for key in ("profile", "seed", "data", "tokenizer", "train", "adapt", "eval"):
        assert claims[key] == cpu[key], key
    # shift: the stage's parameters (sequences, length) as cpu's; more encodings only add shift@<encoding> stages
    assert {k: v for k, v in claims["shift"].items() if k != "encodings"} == {
        k: v for k, v in cpu["shift"].items() if k != "encodings"
    }
    assert claims["shift"]["encodings"][: len(cpu["shift"]["encodings"])] == cpu["shift"]["encodings"]
    assert {k: v for k, v in claims["diagnostics"].items() if k not in ("runs", "seeds")} == {
        k: v for k, v in cpu["diagnostics"].items() if k not in ("runs", "seeds")
    }
    # more seeds add stages to the runs x seeds matrix; a seed is no stage parameter, so cpu's stay as they are
    assert set(claims["diagnostics"]["seeds"]) >= set(cpu["diagnostics"]["seeds"])
    assert claims["encodings"].items() >= cpu["encodings"].items()
    assert claims["diagnostics"]["runs"].items() >= cpu["diagnostics"]["runs"].items()
