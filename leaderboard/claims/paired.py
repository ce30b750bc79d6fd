"""Per-example and per-document comparisons of two encodings' runs (McNemar, the crossed seeds x examples
standard error, paired documents, a paired bootstrap of ROUGE). Since issue 55 they decide no verdict (the training
run is the unit: ``replication``); ``calibration`` runs them on A/A pairs of seeds to show why they were retired.

Two encodings evaluated on the same test examples see the same easy and hard examples; their
per-example outcomes are correlated, and the standard error of the *difference* of the paired
outcomes is smaller than the two means' errors combined (which count the examples' difficulty
twice). The diagnostic tasks draw their test examples from a generator seeded by the task, split
and the task's eval seed (metadata ``seed``, default 1000), never by the model's seed, so every
encoding answers the same examples; this module does not take that on trust: examples are matched
by doc_id *and* by a hash of their prompt and target, and a pair is compared paired only when every
run of both sides holds the same examples, once each, and the mean of its per-example outcomes is
the accuracy the store reports.

Tests (``claims.test``):

- ``mcnemar``: one seed per encoding and a "better" claim: the exact McNemar test, i.e. a two-sided
  binomial(b + c, 1/2) test of the discordant examples (b: the focus right and the other wrong; c: the
  reverse); its p-value enters the store's Holm correction (``verdicts``), the direction is the difference's.
- ``paired-se``: >= 2 seeds per encoding (seed s of the focus paired with seed s of the other: the
  seeds in sorted order, which is the same seed value when both sides ran the same seeds), or an
  "equal" claim, with >= ``MIN_EXAMPLES`` shared examples. With d[s][i] = focus − other on example i
  of seed pair s (in {-1, 0, 1}), the difference is the mean of d and its se the crossed two-way
  random-effects one (``paired_stats``): training seeds, examples and their residual each counted
  once (for one seed pair, var(d)/n: the paired t, or the limit of a paired bootstrap over examples;
  in closed form, so exact and deterministic). The p-value is a t on diff/se with k − 1 degrees of
  freedom over k >= 2 seed pairs when the seeds' component is in the se, else n − 1
  (``paired_anova``). When se is 0 (every example the same difference) the pooled McNemar test over
  all seed pairs decides instead, so a gap without any spread is not "certain" by itself.

- ``paired-docs``: perplexity at one length (``ppl@L``, unit ppl) where both sides' runs scored the same
  tokens of the same documents (``ppl_blocks``: the targets protocol, one tokenizer): each document's mean
  NLL is an outcome, the difference of log perplexities and its se come from :func:`paired_anova` over
  seeds x documents, and the t on its df decides; the se is shown in ppl (× the focus's ppl, the delta
  method). With one seed the uncertainty is over documents, not training seeds, and the note says so.

- ``paired-bootstrap``: SCROLLS' Rgm (``rouge_gm``: the geometric mean of three corpus means, so no
  per-document outcome) where both sides' single runs answered the same >= ``MIN_EXAMPLES`` documents: the
  documents are resampled together (``BOOTSTRAP`` times, a fixed seed), the se is the spread of the Rgm
  difference, and a t on n − 1 df decides.

Anything else (no samples, different examples or seed counts, a metric that is neither the per-example
``correct`` of the samples table nor a perplexity with per-document sums: cells, task means, scores) is
compared unpaired (``stats``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from peeval import records
from peeval.records.stats import sample_variance

from .matching import Store

#: fewest shared examples for the normal-approximation paired test (McNemar is exact for any n)
MIN_EXAMPLES = 10


@dataclass
class Paired:
    """A paired comparison of two encodings (raw shares of examples in [0, 1], focus − other)."""

    diff: float  # mean over seed pairs and examples of focus − other
    se: float
    test: str  # 'mcnemar' | 'paired-se'
    p: float | None  # the McNemar p-value when the test decides by it
    n: int  # shared examples (per seed pair)
    pairs: int  # seed pairs
    b: int  # discordant examples, all seed pairs: focus right, other wrong
    c: int  # other right, focus wrong
    seeds_match: bool  # seed s paired with seed s (else by seed order)
    df: float | None = None  # the t's degrees of freedom (paired_anova); None: McNemar's exact p decides

    def describe(self) -> str:
        how = "seed s with seed s" if self.seeds_match else "seeds paired in sorted order"
        out = f"paired on {self.n} shared examples x {self.pairs} seed pair(s) ({how}); discordant {self.b}/{self.c}"
        if self.p is not None:
            out += f", McNemar exact p={self.p:.3g}"
        if self.pairs == 1:
            out += " (one seed: the uncertainty is over examples, not training seeds)"
        return out


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: twice the binomial(b + c, 1/2) tail at min(b, c), at most 1."""
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**m)


def paired_stats(focus: list[list[float]], other: list[list[float]]) -> tuple[float, float]:
    """(mean difference, se) of outcomes ``focus[s][i]`` vs ``other[s][i]`` (k seed pairs x n shared
    examples). d[s][i] = focus − other is a crossed design (every seed pair answers every example):
    d = mean + seed effect + example effect + residual, and Var(mean d) = σ_seed²/k + σ_ex²/n +
    σ_res²/(kn), each σ² from the two-way ANOVA mean squares (MS_seed = n·var of the seed pairs'
    means, MS_ex = k·var of the examples' means, MS_res the residual) and truncated at 0 — the
    textbook unbiased estimator, which neither drops the training seeds' spread nor counts the
    residual twice. One seed pair: var_i(d)/n, the paired t / bootstrap standard error."""
    diff, se, _ = paired_anova(focus, other)
    return diff, se


def paired_anova(focus: list[list[float]], other: list[list[float]]) -> tuple[float, float, float | None]:
    """:func:`paired_stats` and the degrees of freedom of its t: k − 1 when the seed component is in the se
    (σ_seed² estimated > 0: the conservative end, the training seeds being the repeats generalised over),
    else those of what the se rests on — n − 1 (the examples' component: the variance estimate is then
    MS_ex/(kn)), or (k − 1)(n − 1) (the residual alone); one seed pair: n − 1; one example: k − 1."""
    k, n = len(focus), len(focus[0])
    d = [[a - b for a, b in zip(fs, os_, strict=True)] for fs, os_ in zip(focus, other, strict=True)]
    per_seed = [sum(row) / n for row in d]
    per_example = [sum(d[s][i] for s in range(k)) / k for i in range(n)]
    diff = sum(per_seed) / k
    if n == 1:
        return diff, (math.sqrt(sample_variance(per_seed) / k) if k >= 2 else 0.0), (float(k - 1) if k >= 2 else None)
    if k == 1:
        return diff, math.sqrt(sample_variance(d[0]) / n), float(n - 1)
    ms_seed, ms_ex = n * sample_variance(per_seed), k * sample_variance(per_example)
    res = sum((d[s][i] - per_seed[s] - per_example[i] + diff) ** 2 for s in range(k) for i in range(n))
    ms_res = res / ((k - 1) * (n - 1))
    var_seed, var_ex = max(0.0, (ms_seed - ms_res) / n), max(0.0, (ms_ex - ms_res) / k)
    var = var_seed / k + var_ex / n + ms_res / (k * n)
    tiny = 1e-12 * var  # a component below round-off of the total (identical seed means: 1e-34) is not in it
    df = k - 1 if var_seed / k > tiny else n - 1 if var_ex / n > tiny else (k - 1) * (n - 1)
    return diff, math.sqrt(var), float(df)


def _outcomes(store: Store, unit: list[str], task: str, metric: str) -> tuple[dict[int, tuple[str, bool]], str]:
    """The per-example outcomes of the run that gives this unit its number, or ({}, why not)."""
    for run_id in unit:  # the same run as stats.run_value: the latest that has the metric
        got = store.values.get((run_id, task), {}).get(metric)
        if got is None:
            continue
        rows = store.outcomes(run_id, task)
        if not rows:
            return {}, f"run {run_id} has no per-example samples"
        out = {doc: (h, ok) for doc, h, ok in rows}
        if len(out) != len(rows):
            return {}, f"run {run_id} holds a doc_id twice"
        acc = sum(ok for _, ok in out.values()) / len(out) * records.outcome_scale(task, metric)
        if not math.isclose(acc, got[0], rel_tol=1e-6, abs_tol=1e-9):
            return {}, f"run {run_id}: its samples give {acc:.6g}, not its {metric} {got[0]:.6g}"
        return out, ""
    return {}, "no run with the metric"


def _per_unit(focus_units: list[list[str]], other_units: list[list[str]], fetch) -> tuple[list | None, str]:
    """[focus side, other side], each the per-unit outcomes ``fetch(unit)`` gives (a dict, or ({}, why not)); or
    (None, why) when the seed counts differ or a unit has none."""
    if not focus_units or len(focus_units) != len(other_units):
        return None, f"seed counts differ ({len(focus_units)} vs {len(other_units)})"
    sides = []
    for units in (focus_units, other_units):
        side = []
        for unit in units:
            got, why = fetch(unit)
            if not got:
                return None, why
            side.append(got)
        sides.append(side)
    return sides, ""


def compare(
    store: Store, task, metric: str, focus_units: list[list[str]], other_units: list[list[str]], kind: str = "better"
) -> tuple[Paired | None, str]:
    """The paired comparison of two encodings' runs on ``task``/``metric``, or (None, why it was not
    possible) — then the caller falls back to the unpaired rule."""
    if not isinstance(task, str) or not records.is_outcome(metric, task):  # per example: the samples' 0/1 correct
        what = "task" if isinstance(task, str) else "task mean"
        return None, f"no per-example outcome for {metric!r} of a {what}"
    sides, why = _per_unit(focus_units, other_units, lambda unit: _outcomes(store, unit, task, metric))
    if sides is None:
        return None, why
    keys = {doc: h for doc, (h, _) in sides[0][0].items()}
    for out in sides[0] + sides[1]:
        if {doc: h for doc, (h, _) in out.items()} != keys:
            return None, "the runs answered different examples"
    docs = sorted(keys)
    f = [[int(out[doc][1]) for doc in docs] for out in sides[0]]
    o = [[int(out[doc][1]) for doc in docs] for out in sides[1]]
    k, n = len(f), len(docs)
    pairs = [(x, y) for fs, os_ in zip(f, o, strict=True) for x, y in zip(fs, os_, strict=True)]
    b, c = sum(x > y for x, y in pairs), sum(x < y for x, y in pairs)
    seeds = [[store.runs[u[0]].get("seed") for u in units] for units in (focus_units, other_units)]
    diff, se, df = paired_anova(f, o)
    if k == 1 and kind == "better":
        return Paired(diff, se, "mcnemar", mcnemar_exact(b, c), n, k, b, c, seeds[0] == seeds[1]), ""
    if n < MIN_EXAMPLES:
        return None, f"{n} shared examples (< {MIN_EXAMPLES} for a paired test over seeds)"
    p = mcnemar_exact(b, c) if se == 0.0 else None
    return Paired(diff, se, "paired-se", p, n, k, b, c, seeds[0] == seeds[1], df), ""


def _doc_nll(store: Store, unit: list[str], task: str, metric: str, length: int) -> tuple[dict, str]:
    """{doc_id: (what was scored, mean NLL)} of the run that gives this unit its ppl@L, or ({}, why not)."""
    for run_id in unit:  # the same run as stats.run_value: the latest that has the metric
        got = store.values.get((run_id, task), {}).get(metric)
        if got is None:
            continue
        rows = store.blocks(run_id, task, length)
        if not rows or any(n <= 0 for *_, n in rows):
            return {}, f"run {run_id} has no per-document perplexity sums (ppl_blocks)"
        ppl = math.exp(-sum(r[2] for r in rows) / sum(r[3] for r in rows))
        if not math.isclose(ppl, got[0], rel_tol=1e-6):
            return {}, f"run {run_id}: its documents give ppl {ppl:.6g}, not its {metric} {got[0]:.6g}"
        return {d: (k, -ll / n) for d, k, ll, n in rows}, ""
    return {}, "no run with the metric"


def compare_ppl(
    store: Store, task, metric: str, focus_units: list[list[str]], other_units: list[list[str]]
) -> tuple[tuple[float, float, float | None, int, int] | None, str]:
    """Perplexity at one length, paired over documents: (log-ppl difference focus − other, its se, the t's df,
    documents, seed pairs), or (None, why not). Each document's mean NLL over its scored tokens is an outcome
    (the targets protocol scores the same tokens of it at every length and for every model of one tokenizer);
    seeds x documents is the crossed design of :func:`paired_anova`. With equal targets per document the
    mean of the per-document differences is the difference of log perplexities."""
    parsed = records.parse_ppl_metric(metric) if isinstance(task, str) else None
    if parsed is None or parsed[0] != "ppl":
        return None, f"{metric!r} is not a perplexity at one length"
    sides, why = _per_unit(focus_units, other_units, lambda unit: _doc_nll(store, unit, task, metric, parsed[1]))
    if sides is None:
        return None, why
    keys = {d: k for d, (k, _) in sides[0][0].items()}
    if any({d: k for d, (k, _) in got.items()} != keys for got in sides[0] + sides[1]):
        return None, "the runs scored different tokens (another tokenizer, protocol or target run)"
    docs = sorted(keys)
    if len(docs) < 2:
        return None, f"{len(docs)} document(s): too few for a paired test"
    f = [[got[d][1] for d in docs] for got in sides[0]]
    o = [[got[d][1] for d in docs] for got in sides[1]]
    diff, se, df = paired_anova(f, o)
    return (diff, se, df, len(docs), len(f)), ""


#: resamples of the paired bootstrap over documents (Monte Carlo error of its se ~ 1/sqrt(2 B) = 0.7 %)
BOOTSTRAP = 10_000


def rouge_gm(triples) -> float:
    """SCROLLS' Rgm of per-document (rouge1, rouge2, rougeL): the geometric mean of the three corpus means, x 100
    (peeval.tasks.scrolls.metrics.rouge_geometric_mean on the same numbers; numpy arrays of shape (..., n, 3))."""
    import numpy as np

    return 100.0 * np.prod(np.mean(triples, axis=-2), axis=-1) ** (1 / 3)


def _doc_rouge(store: Store, unit: list[str], task: str, metric: str) -> tuple[dict, str]:
    """{doc_id: (hash, (rouge1, rouge2, rougeL))} of the run that gives this unit its Rgm, or ({}, why not)."""
    for run_id in unit:  # the same run as stats.run_value: the latest that has the metric
        got = store.values.get((run_id, task), {}).get(metric)
        if got is None:
            continue
        rows = store.scores(run_id, task)
        try:
            out = {d: (h, tuple(float(v[k]) for k in ("rouge1", "rouge2", "rougeL"))) for d, (h, v) in rows.items()}
        except (KeyError, TypeError, ValueError):
            return {}, f"run {run_id} has no per-document rouge1/rouge2/rougeL (samples.scores)"
        if not out:
            return {}, f"run {run_id} has no per-document rouge1/rouge2/rougeL (samples.scores)"
        gm = float(rouge_gm([t for _, t in out.values()]))
        if not math.isclose(gm, got[0], rel_tol=1e-6, abs_tol=1e-9):
            return {}, f"run {run_id}: its documents give {metric} {gm:.6g}, not its {got[0]:.6g}"
        return out, ""
    return {}, "no run with the metric"


def compare_rouge(
    store: Store, task, metric: str, focus_units: list[list[str]], other_units: list[list[str]]
) -> tuple[tuple[float, float, float, int] | None, str]:
    """SCROLLS' Rgm (a corpus statistic: no per-document outcome), one seed per side, paired over the documents
    both answered: (difference focus − other, its se from a paired bootstrap over documents, the t's df n − 1,
    documents), or (None, why not). The resamples are drawn with a fixed seed, so the se is deterministic."""
    import numpy as np

    if metric != "rouge_gm" or not isinstance(task, str):
        return None, f"{metric!r} is not a corpus ROUGE"
    sides, why = _per_unit(focus_units, other_units, lambda unit: _doc_rouge(store, unit, task, metric))
    if sides is None:
        return None, why
    if len(sides[0]) != 1:
        return None, f"{len(sides[0])} seeds: the paired bootstrap over documents takes one seed per side"
    (f,), (o,) = sides
    if {d: h for d, (h, _) in f.items()} != {d: h for d, (h, _) in o.items()}:
        return None, "the runs answered different documents"
    docs = sorted(f)
    if len(docs) < MIN_EXAMPLES:
        return None, f"{len(docs)} shared documents (< {MIN_EXAMPLES} for a paired bootstrap)"
    tf, to = np.array([f[d][1] for d in docs]), np.array([o[d][1] for d in docs])
    diff = float(rouge_gm(tf) - rouge_gm(to))
    idx = np.random.default_rng(0).integers(0, len(docs), size=(BOOTSTRAP, len(docs)))
    se = float(np.std(rouge_gm(tf[idx]) - rouge_gm(to[idx]), ddof=1))  # the same documents on both sides
    return (diff, se, float(len(docs) - 1), len(docs)), ""
