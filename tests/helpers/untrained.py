"""A store's outcomes replaced by an untrained model's (issue 55 item 7): every run keeps its metadata (encoding,
seed, options, curves, training budget unless told otherwise) but answers as a model that learned nothing.

- accuracy-like metrics (acc, read_acc, em, exact_match, cells ``acc@...``): one constant answer per checkpoint, so
  a share near chance, drawn per run around 0.5 (a binomial draw over the run's n examples, default 100);
- perplexity and bits per byte: a uniform guess over the vocabulary times a per-run offset and per-value noise
  (``ppl@L`` of one run move together, as an untrained model's do);
- TAPE table 8's shift-stability differences: near-uniform attention (3 BOS tokens take ~8.5 % of the mass)
  with per-run noise; dot-product differences near their round-off;
- ROUGE and anything else: near zero.

The noise differs per encoding and per seed (issue 60): two encodings are never exactly equal, so a decision rule
has something to be fooled by.
"""

from __future__ import annotations

import copy
import math
import random

ACC = ("acc", "read_acc", "seq_acc", "em", "exact_match", "f1")


def _kind(metric: str) -> str:
    head = metric.split("@", 1)[0].split(",", 1)[0]
    if head in ("ppl", "perplexity", "word_perplexity", "byte_perplexity"):
        return "ppl"
    if head in ("bpb", "bits_per_byte"):
        return "bpb"
    if head in ACC or metric.startswith("acc"):
        return "acc"
    if head in ("attn_diff", "pe_dot_diff"):
        return head
    return "other"


def untrained_store(store, seed: int, zero_tokens: bool = False, vocab: int = 512):
    """A copy of ``store`` (leaderboard.claims.Store) with every value an untrained model's (draw ``seed``);
    ``zero_tokens``: the runs' training budget set to 0 tokens as well (the metadata of an untrained store)."""
    rng = random.Random(seed)
    out = copy.copy(store)
    out.con = None  # no per-example samples: an untrained model's would be noise too, and nothing decides on them
    out.samples = {}
    out.runs = copy.deepcopy(store.runs)
    offsets = {rid: rng.gauss(0.0, 0.05) for rid in out.runs}  # per run: its own untrained initialisation
    values = {}
    for (rid, task), metrics in store.values.items():
        got = {}
        for metric, (_v, se, n) in metrics.items():
            kind, off = _kind(metric), offsets.get(rid, 0.0)
            if kind == "acc":
                k = int(n or 100)
                v = sum(rng.random() < 0.5 + off for _ in range(k)) / k
                got[metric] = (v, math.sqrt(max(v * (1 - v), 1e-4) / k), n)
            elif kind == "ppl":
                got[metric] = (vocab * math.exp(off + rng.gauss(0.0, 0.01)), None, n)
            elif kind == "bpb":
                got[metric] = (math.log2(vocab) / 4.0 * math.exp(off + rng.gauss(0.0, 0.01)), None, n)
            elif kind == "attn_diff":
                got[metric] = (0.085 * math.exp(off + rng.gauss(0.0, 0.02)), 0.003, n)
            elif kind == "pe_dot_diff":
                got[metric] = (abs(rng.gauss(1e-4, 5e-5)), 1e-5, n)
            else:
                got[metric] = (abs(rng.gauss(0.5, 0.3)), None if se is None else 0.3, n)
        values[(rid, task)] = got
    out.values = values
    if zero_tokens:
        for r in out.runs.values():
            if isinstance(r.get("summary"), dict) and r["summary"].get("tokens") is not None:
                r["summary"]["tokens"] = 0
            base = (r.get("params") or {}).get("base_train")
            if isinstance(base, dict):
                base["tokens"] = 0
    return out
