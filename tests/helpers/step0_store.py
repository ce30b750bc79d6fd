"""A store of real tiny runs and their real step-0 controls (issue 67): RoPE, TAPE and TAPE without equivariance,
three seeds each, pretrained for a few steps by ``peeval train`` (which saves ``<out>/step0``), both checkpoints
measured by TAPE table 8's real instrument (``peeval.evaluation.shift_stability`` on the mirror's PG-19 windows) and
ingested by ``leaderboard.ingest``; then, read by the claims:

- :func:`with_budget`: the trained runs' recorded budget raised to the claims' criterion (tokens per parameter),
  as if pretrained at scale: the outcomes stay the tiny models' own, only the budget gate is passed;
- :func:`as_if_trained`: every trained run's outcomes replaced by its own step-0 control's (the control runs
  ingested as if trained; its controls stay beside it).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from helpers.training import TEXT

#: (store key, pe, pe_options): the encodings of the TAPE table 8 pairs, and learned absolute positions (not shift
#: invariant at any weights: their shifted ids read other random rows)
ENCODINGS = (("rope", "rope", {}), ("tape", "tape", {}), ("tape-noeq", "tape", {"equivariant": False}),
             ("learned", "learned", {}))  # fmt: skip
SEEDS = (0, 1, 2)
#: the smoke profile's own shape (another shape is a ladder rung, never a claim's run), trained long enough that
#: attention moves away from its near-uniform start
TRAIN = dict(profile="smoke", steps=100, lr=1e-2, eval_every=50, save_every=100, train_chars=None, val_chars=None)
SHIFT = ["--sequences", "6", "--length", "60"]  # 60 + 3 BOS tokens inside the 64-token window


def build(root: Path, mirror: Path) -> Path:
    """Train, measure and ingest into ``root / "peeval.duckdb"`` (returned)."""
    import os

    from leaderboard.ingest import ingest
    from peeval.evaluation.shift_stability import main as shift
    from peeval.training.data import train_bpe
    from peeval.training.pretrain import run_train

    STEP0_DIR = "step0"

    os.environ.setdefault("PEEVAL_DATA_MIRROR", str(mirror))
    corpus, tok = root / "corpus", root / "tok"
    corpus.mkdir(parents=True)
    for i in range(4):
        (corpus / f"{i:02d}.txt").write_text(TEXT)
    train_bpe([TEXT], 200).save_pretrained(tok)
    for key, pe, opts in ENCODINGS:
        for seed in SEEDS:
            ck = root / "checkpoints" / f"{key}-s{seed}"
            run_train(ck, pe, opts or None, seed=seed, tokenizer=str(tok), corpus=str(corpus), **TRAIN)
            assert (ck / STEP0_DIR / "config.json").is_file(), f"peeval train saved no step-0 control in {ck}"
            for folder, out in ((ck, f"{key}-s{seed}"), (ck / STEP0_DIR, f"{key}-s{seed}-step0")):
                assert shift(["--checkpoint", str(folder), "--out", str(root / "results" / out), *SHIFT]) == 0
    db = root / "peeval.duckdb"
    cwd = Path.cwd()
    os.chdir(root)  # ingest keys checkpoints by their path relative to its root, as the pipeline runs it
    try:
        ingest([Path("results"), Path("checkpoints")], db)
    finally:
        os.chdir(cwd)
    return db


def with_budget(store, tokens_per_param: float = 40.0):
    """A copy of ``store`` whose trained runs record ``tokens_per_param`` tokens per parameter and a final validation
    ppl 1 nat below their unigram ppl (``train_val`` and the summary: learned, past claims.yaml's
    ``lm_learned_margin``), as if pretrained at scale; every outcome the claims compare is kept. Only the budget and
    learned gates are passed."""
    import math

    out = copy.copy(store)
    out.runs = copy.deepcopy(store.runs)
    out.values = dict(store.values)
    for rid, r in out.runs.items():
        s = r.get("summary") or {}
        if s.get("params"):
            s["tokens"] = int(tokens_per_param * s["params"])
        if s.get("unigram_val_ppl"):
            s["final_val_ppl"] = s["unigram_val_ppl"] / math.e
            if (rid, "train_val") in out.values:
                out.values[(rid, "train_val")] = {**out.values[(rid, "train_val")],
                                                  "ppl": (s["final_val_ppl"], None, None)}  # fmt: skip
    return out


def as_if_trained(store):
    """A copy of ``store`` whose every trained run answers as its own step-0 control (same task, same metrics): the
    control is the run of checkpoint ``<trained checkpoint>/step0``."""
    from pathlib import PurePosixPath

    out = copy.copy(store)
    out.values = dict(store.values)
    controls = getattr(store, "controls", {})
    by_ckpt = {str(r.get("checkpoint")): rid for rid, r in store.runs.items()}
    replaced = set()
    for cid, c in controls.items():
        rid = by_ckpt.get(str(PurePosixPath(str(c["checkpoint"])).parent))
        for (run, task), metrics in store.values.items():
            if run == cid and rid is not None:
                out.values[(rid, task)] = metrics
                replaced.add(rid)
    assert replaced == set(store.runs), "a trained run without its step-0 control's outcomes"
    return out


def dump(store) -> str:
    """The numbers of ``store`` (for a failing assertion's message)."""
    return json.dumps({f"{r}|{t}": m for (r, t), m in sorted(store.values.items())}, default=str)[:2000]
