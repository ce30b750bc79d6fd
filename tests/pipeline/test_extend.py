"""Context extension of the pipeline's own rope model (issue 29 item 1a, params.yaml `extend`): the stages
`extend@<method>` / `eval_extend`, the rows ingest makes of them ("rope (64 tokens) + tape", trained for the
extended window) and the claims that read them (TAPE table 2 scaled down), kept apart from the SmolLM2
adaptations' claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

import common  # noqa: E402
from pipeline_params import load, validate  # noqa: E402

BIN = Path(sys.executable).parent


def _profile(name: str) -> dict:
    return yaml.safe_load((REPO / "params" / f"{name}.yaml").read_text())


def test_cpu_claims_extends_three_rope_seeds_with_every_method_and_cpu_runs_none():
    """Issue 55: the training run is the unit of replication, so each method extends each of 3 rope seeds
    (>= 3 runs per side), each extension with its base's seed; seed 0's folders keep their published names."""
    _, claims = load(REPO / "params" / "cpu-claims.yaml")
    bases = [b.encoding for b in claims.extend.bases]
    assert len(bases) >= 3 and all(claims.encodings[b].pe == "rope" for b in bases)
    assert sorted(claims.seed_of(b) for b in bases) == list(range(len(bases)))  # independently trained
    assert set(claims.extend.methods) == {"tape", "lora", "theta", "pi", "yarn"}
    runs = claims.extend.runs()
    assert runs["tape"] == ("tape", "rope") and runs["tape-s1"] == ("tape", "rope-s1")
    assert len(runs) == 5 * len(bases)
    s = claims.extend.train.set
    assert s["seq_len"] == 4 * claims_train_length() and s["factor"] == 4.0 and s["steps"] > 0  # one budget for all
    suites = [claims.eval.suites[x] for x in claims.extend.eval]
    lengths = {int(L) for x in suites for L in x.metadata.get("lengths", [])}
    assert max(lengths) == 4 * s["seq_len"]  # read up to 4x the extended window
    assert {"peeval_scrolls_qmsum", "peeval_scrolls_contract_nli", "peeval_scrolls_quality"} <= {
        t for x in suites for t in x.tasks
    }
    for name in ("cpu", "smoke", "gpu", "paper"):
        assert validate(_profile(name)).extend.methods == [], name


def claims_train_length() -> int:
    from peeval.training.profiles import get_profile

    return int(get_profile("train", "cpu")["seq_len"])


@pytest.mark.parametrize(
    "change,named",
    [
        (
            lambda p: p["extend"].update(methods=["tape"], bases=[{"encoding": "nosuch", "tag": ""}]),
            "extend.bases.0.encoding",
        ),
        (
            lambda p: p["extend"].update(methods=["tape"], bases=[{"encoding": "nope", "tag": ""}]),
            "extend.bases.0.encoding",
        ),
        (lambda p: p["extend"].update(methods=["tape"], bases=[]), "extend.bases"),
        (
            lambda p: p["extend"].update(bases=[{"encoding": "rope", "tag": ""}, {"encoding": "rope", "tag": "-s1"}]),
            "extend.bases",
        ),
        (lambda p: p["extend"].update(bases=[{"encoding": "rope", "tag": "s1"}]), "extend.bases"),
        (lambda p: p["extend"].update(bases=[{"encoding": "rope", "tag": "/.."}]), "extend.bases"),
        (lambda p: p["extend"].update(bases=[{"encoding": "rope"}]), "extend.bases"),
        (lambda p: p["extend"].update(base="rope"), "extend: unknown key 'base' (did you mean 'bases'?)"),  # before 55
        (lambda p: p["extend"].update(methods=["longlora"]), "extend.methods"),
        (lambda p: p["extend"].update(eval=["nosuch"]), "extend.eval"),
        (lambda p: p.pop("extend"), "extend"),
    ],  # fmt: skip
    ids=[
        "unknown-base",
        "not-rope",
        "no-base",
        "base-twice",
        "tag-not-dash",
        "tag-path",
        "no-tag",
        "old-base-key",
        "unknown-method",
        "unknown-suite",
        "missing",
    ],
)
def test_bad_extend_is_one_line_naming_the_key(change, named, tmp_path, monkeypatch, capsys):
    p = _profile("smoke")
    change(p)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        common.params()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and named in err, err
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]


def _run(args: list[str], cwd: Path, mirror: str | None = None) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    env.pop("PEEVAL_DATA_MIRROR", None)  # the stage scripts set it from params.yaml data.root
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH", "")) if x)  # `leaderboard`
    if mirror:
        env["PEEVAL_DATA_MIRROR"] = mirror
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-3000:])
    return r.stdout


@pytest.mark.skipif(
    not (REPO / _profile("smoke")["data"]["root"] / "local" / "gutenberg-train").is_dir(),
    reason="the offline data mirror is not there (params/smoke.yaml data.root)",
)
def test_extend_stages_ingest_and_claims(tmp_path):
    """A smoke rope model (64 tokens) extended to 128 by tape and lora, perplexity read up to 256: the rows are
    named for their base, carry the extended window and the base's budget; the scaled TAPE table 2 claim
    reads them (not decidable at this scale: a smoke model; SCROLLS after the extension too) and the SmolLM2
    claim of the same table does not. A second rope seed extended by tape (issue 55) trains with its base's
    seed into checkpoints/extend/tape-s1 and is a second seed of the same row, not a row of its own."""
    p = _profile("smoke")
    p["data"]["root"] = str((REPO / p["data"]["root"]).resolve())
    p["encodings"]["rope-s1"] = {"pe": "rope", "seed": 1}
    p["extend"] = {
        "bases": [{"encoding": "rope", "tag": ""}, {"encoding": "rope-s1", "tag": "-s1"}],
        "methods": ["tape", "lora"],
        "train": {"set": {"seq_len": 128, "factor": 2.0, "steps": 2}},
        "eval": ["ext"],
    }
    p["eval"]["suites"]["ext"] = {
        "tasks": ["peeval_ppl_pg19", "peeval_scrolls_contract_nli"],
        "metadata": {"lengths": [64, 256], "targets": 128, "skip": 256, "max_docs": 2},
        "limit": 2,
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    py = sys.executable
    ck = tmp_path / "checkpoints" / "pretrain" / "rope"
    _run([py, "-m", "peeval.cli", "train", "--pe", "rope", "--profile", "smoke", "--out", str(ck)], tmp_path,
         mirror=p["data"]["root"])  # fmt: skip
    ck1 = tmp_path / "checkpoints" / "pretrain" / "rope-s1"
    _run([py, "-m", "peeval.cli", "train", "--pe", "rope", "--profile", "smoke", "--seed", "1", "--out", str(ck1)],
         tmp_path, mirror=p["data"]["root"])  # fmt: skip
    for m, base, name, seed in (
        ("tape", "rope", "tape", 0),
        ("lora", "rope", "lora", 0),
        ("tape", "rope-s1", "tape-s1", 1),
    ):
        out = _run([py, str(REPO / "pipelines" / "extend.py"), m, base], tmp_path)
        assert f"extend {name}: checkpoints/pretrain/{base} to 128 tokens by {m}, seed {seed}" in out, out
        s = json.loads((tmp_path / "checkpoints" / "extend" / name / "adapt_summary.json").read_text())
        assert s["base"] == f"checkpoints/pretrain/{base}" and s["seq_len"] == 128 and s["method"] == m
        assert s["seed"] == seed  # extension seed k extends base seed k
        _run([py, str(REPO / "pipelines" / "eval.py"), "extend", name, "ext"], tmp_path)
        res = json.loads((tmp_path / "results" / "extend" / name / "ext" / "results.json").read_text())
        assert res["peeval"]["model_args"]["adapter"] == f"checkpoints/extend/{name}", res["peeval"]["model_args"]
        assert {"ppl@64", "ppl@256"} <= {k.split(",")[0] for k in res["results"]["peeval_ppl_pg19"]}
    db = tmp_path / "store.duckdb"
    _run([py, "-m", "leaderboard.ingest", "results", "checkpoints", "--root", ".", "--db", str(db)], tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    q = "SELECT name, kind, training_length, params, seed, checkpoint FROM runs WHERE kind = 'adapt' ORDER BY 1, 5"
    rows = con.execute(q).fetchall()
    con.close()
    assert [(r[0], r[4], r[5]) for r in rows] == [
        ("rope (64 tokens) + lora", 0, "checkpoints/extend/lora"),
        ("rope (64 tokens) + tape", 0, "checkpoints/extend/tape"),
        ("rope (64 tokens) + tape", 1, "checkpoints/extend/tape-s1"),  # the extension's seed, not the eval's 0
    ]
    assert {r[2] for r in rows} == {128}  # the extended window, not the base's 64
    base = json.loads((ck / "train_summary.json").read_text())
    assert json.loads(rows[0][3])["base_train"] == {"tokens": base["tokens"], "params": base["params"]}
    assert json.loads(rows[2][3])["adapt"]["base"] == "checkpoints/pretrain/rope-s1"
    _run([py, str(REPO / "pipelines" / "claims.py"), "--db", str(db)], tmp_path)
    con = duckdb.connect(str(tmp_path / "claims.duckdb"), read_only=True)
    got = dict(
        con.execute(
            "SELECT claim_id, verdict || ' | ' || coalesce(setting_diff, '') FROM claims "
            "WHERE claim_id IN ('tape-t2-scaled-pg19:tape-vs-lora', 'tape-t2-ctx-ext-pg19:tape-vs-lora', "
            "'tape-t2-scaled-scrolls-contract-nli:tape-vs-lora')"
        ).fetchall()
    )
    con.close()
    # fewer than 3 runs per side (issue 55) of 2-step extensions: read, never decided (SCROLLS after it too)
    for claim in ("tape-t2-scaled-pg19:tape-vs-lora", "tape-t2-scaled-scrolls-contract-nli:tape-vs-lora"):
        verdict = got[claim]
        assert verdict.split(" | ")[0] in ("not decidable here", "not learned at this scale"), verdict
        assert "runs per side" in verdict and "tape seed 0" in verdict, verdict
    assert got["tape-t2-ctx-ext-pg19:tape-vs-lora"].startswith("not measured"), got  # SmolLM2's claim: not these runs
