"""Issue 68 item 11 (rest): the runs' untrained step-0 controls (issue 67) on the front page. They are no encodings:
out of the picture, out of "each encoding against RoPE", out of the encodings' table and out of every count (the
page read "0 of 5 encodings beat RoPE" and "6 encodings" for 2 and 3), shown in a band of their own, marked.

The store: the published cpu board's RoPE, TAPE and NoPE runs (3 seeds each) ingested as this machine's, each with
the step-0 control ``peeval train`` saves beside it (``<run>/step0``, ``"control": "step0"``) and a results.json for
it (a copy of the run's evaluation); a second store without the controls shows that no number of the trained rows
moves."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from leaderboard.ingest import ingest
from leaderboard.site import build_site

RUNS = ("rope", "rope-s1", "rope-s2", "tape", "tape-s1", "tape-s2", "nope", "nope-s1", "nope-s2")
CONTROL = " untrained (step 0)"  # the row name issue 67 gives a control (the words)


def _board(root: Path, controls: bool) -> Path:
    pub = Path(REPO) / "leaderboard" / "published" / "cpu"
    for run in RUNS:
        shutil.copytree(pub / "results" / "pretrain" / run, root / "results" / "pretrain" / run)
        shutil.copytree(pub / "checkpoints" / "pretrain" / run, root / "checkpoints" / "pretrain" / run)
        if not controls:
            continue
        ck = root / "checkpoints" / "pretrain" / run / "step0"  # as peeval train saves it
        ck.mkdir()
        summary = json.loads((ck.parent / "train_summary.json").read_text())
        summary.update(steps=0, tokens=0, control="step0", control_of="..")
        (ck / "train_summary.json").write_text(json.dumps(summary))
        out = root / "results" / "pretrain" / f"{run}-step0"
        shutil.copytree(root / "results" / "pretrain" / run, out)
        for f in out.rglob("results.json"):  # its evaluation: its own checkpoint (the numbers its run's: the store
            # checks each aggregate against its documents, so the copy keeps both)
            doc = json.loads(f.read_text())
            ckpt = f"checkpoints/pretrain/{run}/step0"
            doc["peeval"]["checkpoint"] = doc["peeval"]["model_args"]["pretrained"] = ckpt
            doc["peeval"]["checkpoint_sha256"] = hashlib.sha256(run.encode()).hexdigest()
            f.write_text(json.dumps(doc))
    cwd = Path.cwd()
    os.chdir(root)  # ingest keys checkpoints by their path relative to where it runs, as the pipeline does
    try:
        ingest([Path("results"), Path("checkpoints")], root / "s.duckdb")
    finally:
        os.chdir(cwd)
    return build_site(root / "s.duckdb", root / "site").parent


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    return {c: _board(tmp_path_factory.mktemp(f"controls{int(c)}"), c) for c in (True, False)}


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _rows(site: Path, tid: str) -> list[dict]:
    return json.loads((site / "data" / f"{tid}.json").read_text())


def test_the_store_holds_the_controls_as_rows_of_their_own(sites):
    names = {r["name"] for r in _rows(sites[True], "runs_list")}
    assert names == {"rope", "tape", "nope", *(f"{e}{CONTROL}" for e in ("rope", "tape", "nope"))}


def test_controls_are_counted_nowhere_on_the_front_page(sites):
    html = (sites[True] / "index.html").read_text()
    vs = _rows(sites[True], "vs_rope")
    trained = [r["encoding"] for r in vs]
    assert sorted(trained) == ["nope", "rope", "tape"], trained  # no control against RoPE
    others = len(trained) - 1  # each encoding but the baseline, counted by hand from the table
    caption = _text(re.search(r"<figcaption>(.*?)</figcaption>", html, re.S)[1])
    counts = re.findall(r"(\d+) of (\d+) encodings beat RoPE", caption)
    assert len(counts) == 2 and all(int(n) == others for _, n in counts), caption
    picture = re.search(r'<figure id="picture".*?</figure>', html, re.S)[0]
    assert "untrained" not in picture and "step 0" not in picture
    budget = _text(re.search(r'<p class="lead" id="budget">(.*?)</p>', html, re.S)[1])
    assert " 3 encodings," in budget and " 0–" not in budget, budget  # not "6 encodings", "0–725 steps"
    assert " 725 steps" in budget and "2,969,600 training tokens" in budget, budget
    assert not any(CONTROL in r["encoding"] for r in _rows(sites[True], "leaderboard"))


def test_controls_are_shown_in_their_own_marked_band(sites):
    html = (sites[True] / "index.html").read_text()
    band = re.search(r'<section id="untrained-controls" class="controls">(.*?)</section>', html, re.S)
    assert band, "no band of untrained controls"
    assert re.search(r"<h3>Untrained controls \(step 0\)", band[1])
    assert html.index('id="untrained-controls"') > html.index('id="vs_rope"')  # below the answer, not in it
    assert len(re.findall(r'id="([^"]+)"', html)) == len(set(re.findall(r'id="([^"]+)"', html)))  # ids unique
    shown = _rows(sites[True], "controls")
    assert sorted(r["untrained control (step 0)"] for r in shown) == [f"{e}{CONTROL}" for e in ("nope", "rope", "tape")]
    rope = next(r for r in shown if r["untrained control (step 0)"].startswith("rope"))
    trained = next(r for r in _rows(sites[True], "leaderboard") if r["encoding"] == "rope")
    col = next(k for k in trained if "ppl@256" in k)
    assert rope[col] == pytest.approx(trained[col])  # its numbers as ingested (a copy of its run's, in this store)
    assert '<table id="controls" class="sortable sticky controls">' in band[1]
    assert "best" not in re.search(r'<table id="controls".*?</table>', band[1], re.S)[0]  # competes for nothing


def test_no_number_of_the_trained_rows_moves(sites):
    for tid in ("vs_rope", "leaderboard"):
        assert _rows(sites[True], tid) == _rows(sites[False], tid), tid
    a, b = ((s / "index.html").read_text() for s in (sites[True], sites[False]))
    for pattern in (r"<figcaption>(.*?)</figcaption>", r'<p class="lead" id="budget">(.*?)</p>'):
        assert re.search(pattern, a, re.S)[1] == re.search(pattern, b, re.S)[1]
    assert 'id="untrained-controls"' not in b and 'id="controls"' not in b
