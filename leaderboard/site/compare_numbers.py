"""The compare page's numbers: any two runs, task by task. Where both runs answered the same examples (the
``samples`` table's per-example ``correct``, same prompt and target), the paired difference of their
accuracies with its t interval (``claims.paired.paired_anova`` for one seed pair: var(d)/n on n − 1 degrees
of freedom), McNemar's exact p, and the examples one got right and the other wrong. The page's script only
looks these up (no statistics in JavaScript); runs without shared examples are shown side by side."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from leaderboard.claims.paired import mcnemar_exact, paired_anova
from peeval.records import headline_metrics, is_cell, is_count, parse_ppl_metric, t_quantile

#: fewer shared examples than this: no paired interval (as the claims' paired test)
MIN_SHARED = 10
#: discordant examples shown per direction, and the characters of a prompt shown
SHOWN, CLIP = 10, 400


@dataclass
class PairedTask:
    task: str
    n: int
    a_acc: float
    b_acc: float
    diff: float
    lo: float | None
    hi: float | None
    df: float | None
    mcnemar_p: float
    a_only: list[int] = field(default_factory=list)  # doc ids A got right and B wrong (the first SHOWN)
    b_only: list[int] = field(default_factory=list)
    a_only_count: int = 0
    b_only_count: int = 0


def paired_task(task: str, a: dict[int, tuple[str, bool]], b: dict[int, tuple[str, bool]]) -> PairedTask | None:
    """``a``, ``b``: doc_id -> (prompt and target, correct) of one run each. None when they share fewer than
    ``MIN_SHARED`` examples (same doc id with the same prompt and target)."""
    shared = sorted(d for d in a.keys() & b.keys() if a[d][0] == b[d][0])
    if len(shared) < MIN_SHARED:
        return None
    xa = [float(a[d][1]) for d in shared]
    xb = [float(b[d][1]) for d in shared]
    diff, se, df = paired_anova([xa], [xb])
    half = t_quantile(0.975, df) * se if df else None
    a_only = [d for d in shared if a[d][1] and not b[d][1]]
    b_only = [d for d in shared if b[d][1] and not a[d][1]]
    n = len(shared)
    return PairedTask(task, n, sum(xa) / n, sum(xb) / n, diff, None if half is None else diff - half,
                      None if half is None else diff + half, df, mcnemar_exact(len(a_only), len(b_only)),
                      a_only[:SHOWN], b_only[:SHOWN], len(a_only), len(b_only))  # fmt: skip


def all_pairs(outcomes: dict[str, dict[str, dict[int, tuple[str, bool]]]]) -> dict[str, list[PairedTask]]:
    """``outcomes``: run_id -> task -> doc_id -> (prompt and target, correct). Every pair of runs (key
    ``"<a>|<b>"``, a < b) with at least one task of shared examples: its paired tasks."""
    out: dict[str, list[PairedTask]] = {}
    for a, b in itertools.combinations(sorted(outcomes), 2):
        tasks = [p for t in sorted(outcomes[a].keys() & outcomes[b].keys())
                 if (p := paired_task(t, outcomes[a][t], outcomes[b][t])) is not None]  # fmt: skip
        if tasks:
            out[f"{a}|{b}"] = tasks
    return out


def headline(metrics: dict[str, tuple[float | None, float | None]]) -> list[str]:
    """The metrics of one task shown side by side: its headline ones, else every plain non-count metric; a
    perplexity task (whose numbers are all cells) its perplexity and bits per byte at each length."""
    plain = [m for m in metrics if not is_cell(m) and not is_count(m)]
    # a perplexity task: ppl@L, and bpb@L (what two tokenizers are compared by when per-token ppl is not)
    ppl = sorted((pm[1], pm[0], m) for m in metrics if (pm := parse_ppl_metric(m)) and pm[0] in ("ppl", "bpb"))
    return headline_metrics(plain) or sorted(plain) or [m for *_, m in ppl]


@dataclass
class PairedPpl:
    """Two runs' perplexities at one length on the same target blocks (the same tokens of the same documents):
    the ratio A ÷ B (exp of the mean per-document difference of mean NLLs) and its t interval over documents."""

    task: str
    length: int
    n: int  # documents both scored on the same targets
    a_ppl: float
    b_ppl: float
    ratio: float
    lo: float | None
    hi: float | None
    df: float | None


#: a perplexity block: doc_id -> (what was scored: protocol, target run, tokens; log-likelihood; tokens)
Blocks = dict[int, tuple[tuple, float, int]]


def paired_ppl(task: str, length: int, a: Blocks, b: Blocks) -> PairedPpl | None:
    """The documents both runs scored on the same targets (same protocol, target run and token count): each
    document's mean NLL an outcome, paired (``paired_anova``, one seed pair: var(d)/n on n − 1 df). None when
    fewer than 2 documents are shared (a different tokenizer or protocol shares none)."""
    docs = sorted(d for d in a.keys() & b.keys() if a[d][0] == b[d][0] and a[d][2] > 0)
    if len(docs) < 2:
        return None
    xa = [-a[d][1] / a[d][2] for d in docs]
    xb = [-b[d][1] / b[d][2] for d in docs]
    diff, se, df = paired_anova([xa], [xb])
    half = t_quantile(0.975, df) * se if df else None
    tokens = sum(a[d][2] for d in docs)
    a_ppl = math.exp(-sum(a[d][1] for d in docs) / tokens)
    b_ppl = math.exp(-sum(b[d][1] for d in docs) / tokens)
    return PairedPpl(task, length, len(docs), a_ppl, b_ppl, math.exp(diff),
                     None if half is None else math.exp(diff - half), None if half is None else math.exp(diff + half),
                     df)  # fmt: skip


def all_ppl_pairs(blocks: dict[str, dict[tuple[str, int], Blocks]]) -> dict[str, list[PairedPpl]]:
    """``blocks``: run_id -> (task, length) -> its blocks. Every pair of runs (``"<a>|<b>"``, a < b) with a
    (task, length) of shared target blocks: its paired perplexities."""
    out: dict[str, list[PairedPpl]] = {}
    for a, b in itertools.combinations(sorted(blocks), 2):
        got = [p for t, L in sorted(blocks[a].keys() & blocks[b].keys())
               if (p := paired_ppl(t, L, blocks[a][(t, L)], blocks[b][(t, L)])) is not None]  # fmt: skip
        if got:
            out[f"{a}|{b}"] = got
    return out


def ppl_unpaired(
    blocks: dict[str, dict[tuple[str, int], Blocks]], pairs: dict[str, list[PairedPpl]]
) -> dict[str, dict]:
    """Why two runs that scored the same corpus at the same length have no paired perplexity, per pair key: the
    first such (task, length), ``why`` (``tokenizer``: their target blocks are the same token positions over other
    bytes, ``a_bytes`` vs ``b_bytes`` of document ``doc``: another tokenizer, whose tokens are other text, so neither
    a per-token perplexity nor bits per byte over the same bytes compare; ``protocol``: no document scored on the
    same targets) and ``text``, the line the compare page shows (A and B in key order)."""
    out: dict[str, dict] = {}
    for a, b in itertools.combinations(sorted(blocks), 2):
        key = f"{a}|{b}"
        shared = sorted(blocks[a].keys() & blocks[b].keys())
        if not shared or key in pairs:
            continue
        t, L = shared[0]
        docs = sorted(blocks[a][(t, L)].keys() & blocks[b][(t, L)].keys())
        same_tokens = [d for d in docs if blocks[a][(t, L)][d][0][:4] == blocks[b][(t, L)][d][0][:4]]
        if same_tokens:
            d = same_tokens[0]
            bytes_a, bytes_b = blocks[a][(t, L)][d][0][4], blocks[b][(t, L)][d][0][4]
            text = (f"{t} @ {L}: the same target tokens cover other text ({bytes_a} vs {bytes_b} bytes of document "
                    f"{d}): another tokenizer, so per-token perplexities are not comparable, nor are bits per byte "
                    "over the same bytes (each run's bits per byte over its own targets side by side)")  # fmt: skip
            out[key] = {"task": t, "length": L, "why": "tokenizer", "doc": d, "a_bytes": bytes_a, "b_bytes": bytes_b,
                        "text": text}  # fmt: skip
        else:
            text = f"{t} @ {L}: no document scored on the same targets (another protocol or target run)"
            out[key] = {"task": t, "length": L, "why": "protocol", "text": text}
    return out
