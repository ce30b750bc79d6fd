"""Issue 32 item 4: a results folder written by plain ``lm_eval --model hf --log_samples`` (lm-eval's own
``<model>/results_<date>.json`` + ``samples_<task>_<date>.jsonl``, no peeval provenance) is ingested as an
external run, with its samples, and shown as a row beside the baselines with where it came from."""

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from helpers.training import TEXT, save_tiny_llama

from leaderboard.ingest import IngestError, ingest  # noqa: E402
from leaderboard.site import build_site  # noqa: E402

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def lm_eval_out(tmp_path_factory):
    root = tmp_path_factory.mktemp("plain")
    model = save_tiny_llama(root / "tinyllama", TEXT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run([str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={model}", "--tasks",
                        "peeval_diag_addition_test", "--limit", "3", "--device", "cpu", "--log_samples",
                        "--output_path", str(root / "lm_out")], capture_output=True, text=True, env=env,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return root


def test_plain_lm_eval_results_are_an_external_row_on_the_site(lm_eval_out, tmp_path):
    db = tmp_path / "peeval.duckdb"
    counts = ingest([lm_eval_out / "lm_out"], db=db, root=lm_eval_out)
    assert counts["runs"] == 1 and counts["samples"] == 3, counts
    con = duckdb.connect(str(db), read_only=True)
    (run,) = con.execute("select name, kind, pe, checkpoint, seed, lm_eval_version, results_path from runs").fetchall()
    assert con.execute("select source from runs").fetchall() == [("external",)]  # issue 42: its own source
    n_metrics = con.execute("select count(*) from metrics where task = 'peeval_diag_addition_test'").fetchone()[0]
    prompts = con.execute("select count(prompt), count(correct) from samples").fetchone()
    con.close()
    assert run[:5] == ("hf:tinyllama", "external", None, "tinyllama", 0), run
    assert run[5] and Path(run[6]).name.startswith("results_") and n_metrics >= 2
    assert prompts == (3, 3)  # lm-eval's own samples layout read: prompt and outcome of every document
    out = build_site(db, tmp_path / "site")
    index = out.read_text()
    ext = index[index.index("Context extension") :]
    assert "hf:tinyllama" in ext  # a row beside the adapted models
    (page,) = [p for p in (out.parent / "runs").glob("*.html")]
    assert "results_" in page.read_text() and "tinyllama" in page.read_text()
    assert ingest([lm_eval_out / "lm_out"], db=db, root=lm_eval_out)["runs"] == 1  # idempotent


def test_a_results_json_without_provenance_is_still_refused(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "results.json").write_text('{"results": {"x": {"acc,none": 0.5}}}')
    with pytest.raises(IngestError, match="no 'peeval' provenance"):
        ingest([d], db=tmp_path / "s.duckdb", root=tmp_path)
