"""Issue 41 item 5: lm-eval's RULER needle tasks as a peeval task family (peeval/tasks/ruler/): a results file
lm-eval writes for ``niah_single_1`` ingests into one cell per context length and reaches the site's RULER page,
and a tiny real run on a peeval checkpoint works offline."""

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from peeval.tasks.family import families, family_of

BIN = Path(sys.executable).parent


def _ruler():
    (fam,) = [f for f in families() if f.name == "ruler"]
    return fam


def test_the_family_owns_the_offline_needle_tasks_and_its_grammar_round_trips():
    fam = _ruler()
    assert family_of("niah_single_1") is fam and family_of("niah_single_2") is None  # essays: downloaded
    for length in (64, 128, 131072):
        assert fam.parse_cell(fam.format_cell(length)) == (length,)
    assert fam.parse_cell("acc") is None and fam.parse_cell("64_stderr") is None and fam.parse_cell("-1") is None
    assert fam.cell_length("4096") == 4096 and fam.is_metric("niah_single_1", "4096")
    with pytest.raises(ValueError, match="^here: the length"):
        fam.check_cell("0", "here")


def _results(out: Path, cells: dict[str, float]) -> Path:
    """A results file as plain ``lm_eval --output_path`` writes it for niah_single_1 with max_seq_lengths
    [64, 128]: lm-eval's default length 4096 reports -1 (no samples at that length)."""
    res = {"name": "niah_single_1", "alias": "niah_single_1", "sample_len": 4, "4096,none": -1,
           "4096_stderr,none": "N/A"}  # fmt: skip
    for length, v in cells.items():
        res.update({f"{length},none": v, f"{length}_stderr,none": 0.1})
    doc = {
        "results": {"niah_single_1": res},
        "configs": {"niah_single_1": {"task": "niah_single_1", "metadata": {"max_seq_lengths": [64, 128]}}},
        "higher_is_better": {"niah_single_1": {"4096": True, "8192": True}},  # the YAML's lengths only
        "n-samples": {"niah_single_1": {"original": 1000, "effective": 4}},
        "config": {"model": "hf", "model_args": {"pretrained": "tinyllama"}, "random_seed": 0},
        "date": 1767225600.0,
        "lm_eval_version": "0.4.13",
    }
    d = out / "tinyllama"
    d.mkdir(parents=True)
    (d / "results_2026-01-01T00-00-00.000000.json").write_text(json.dumps(doc))
    return out


def test_a_ruler_results_file_ingests_into_one_cell_per_length_and_a_chart(tmp_path):
    from leaderboard.ingest import ingest
    from leaderboard.site import build_site

    out = _results(tmp_path / "lm_out", {"64": 0.75, "128": 0.25})
    db = tmp_path / "peeval.duckdb"
    assert ingest([out], db=db, root=tmp_path)["runs"] == 1
    con = duckdb.connect(str(db), read_only=True)
    cells = con.execute("SELECT family, task, length, value, n FROM family_length_cells ORDER BY length").fetchall()
    con.close()
    # no cell at lm-eval's default length (-1: no samples), no count (lm-eval's is the task's: 4, not 2 per length)
    assert cells == [("ruler", "niah_single_1", 64, 0.75, None), ("ruler", "niah_single_1", 128, 0.25, None)]
    index = build_site(db, tmp_path / "site")
    page = (index.parent / "ruler.html").read_text()
    assert 'href="ruler.html"' in index.read_text()  # in the navigation
    assert "niah_single_1: needles recalled vs context length" in page and "<svg" in page
    assert "hf:tinyllama" in page


def test_a_bad_length_cell_is_refused_naming_it(tmp_path):
    from leaderboard.ingest import IngestError, ingest

    out = _results(tmp_path / "lm_out", {"0": 0.5})
    with pytest.raises(IngestError, match=r"niah_single_1.*'0,none'.*the length must be a whole number >= 1"):
        ingest([out], db=tmp_path / "s.duckdb", root=tmp_path)


def test_niah_single_1_runs_offline_on_a_peeval_checkpoint(tmp_path):
    """Two documents per length through plain ``lm_eval --model peeval`` (lm-eval's generator sized by the
    checkpoint's own tokenizer, its 500 documents per length generated, 4 scored), ingested into per-length
    cells."""
    pytest.importorskip("wonderwords", reason="the ruler extra (pip install peeval[ruler])")
    from helpers.checkpoints import save_tiny_checkpoint
    from lm_eval.tasks.ruler.niah_utils import TEMPLATE
    from lm_eval.tasks.ruler.prepare_niah import get_haystack

    from leaderboard.ingest import ingest

    corpus = [TEMPLATE, get_haystack("repeat"), "One of the special magic numbers for x is: 0123456789."]
    ckpt = save_tiny_checkpoint(tmp_path / "rope", corpus, pe="rope", vocab_size=400, max_positions=512)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    md = json.dumps({"max_seq_lengths": [256, 320]})
    r = subprocess.run([str(BIN / "lm_eval"), "--model", "peeval", "--model_args", f"pretrained={ckpt}",
                        "--tasks", "niah_single_1", "--device", "cpu", "--metadata", md, "--samples",
                        json.dumps({"niah_single_1": [0, 1, 500, 501]}), "--output_path", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    db = tmp_path / "s.duckdb"
    ingest([tmp_path / "out"], db=db, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    cells = con.execute("SELECT task, length FROM family_length_cells ORDER BY length").fetchall()
    con.close()
    assert cells == [("niah_single_1", 256), ("niah_single_1", 320)]
