"""Estimate, the third step of a claim (schema -> matching -> stats, paired -> verdicts): peeval's raw
metric in the paper's unit, and one number per encoding (mean over seeds with its standard error);
:func:`estimate_pairs` gives both sides of every comparison of a claim.

Uncertainty per encoding: the leaderboard's mean ± stderr over seeds (``peeval.records.stats.seed_estimate``:
across seeds when there are >= 2, else the run's own stderr, else for accuracies the binomial one from n).
``Estimate.method`` names which ('seeds', 'lm-eval stderr', 'binomial'): the claims table says which test a
verdict used.
These are the unpaired fallback; ``paired`` compares two encodings example by example when it can.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from peeval.records import stats

from .matching import Evidence, Store
from .schema import ACC_UNITS, Claim

#: the plus-four stderr of a proportion (peeval.records.stats owns it: the leaderboard uses it too)
binomial_stderr = stats.binomial_stderr


@dataclass
class Estimate(stats.SeedEstimate):
    """One encoding's number in the paper's unit: the leaderboard's mean ± stderr over seeds
    (:class:`peeval.records.stats.SeedEstimate`), and the runs it rests on."""

    run_ids: list[str] = field(default_factory=list)


def to_unit(unit: str, value: float, stderr: float | None) -> tuple[float, float | None]:
    """peeval's raw metric (accuracies in [0, 1]) converted to the paper's unit."""
    if unit == "acc_pct":
        return 100.0 * value, None if stderr is None else 100.0 * stderr
    if unit == "err_pct":
        return 100.0 * (1.0 - value), None if stderr is None else 100.0 * stderr
    if unit == "attn_diff_e2":
        return 100.0 * value, None if stderr is None else 100.0 * stderr
    return value, stderr


def combine_seeds(
    per_seed: list[tuple[float, float | None, int | None]], acc_like: bool, kinds: list[str | None] | None = None
) -> Estimate | None:
    """Mean ± stderr over seeds (the leaderboard's own: :func:`peeval.records.stats.seed_estimate`) as an
    :class:`Estimate`; ``acc_like``: the number is a proportion of examples."""
    est = stats.seed_estimate(per_seed, acc_like, kinds)
    return None if est is None else Estimate(**dataclasses.asdict(est))


def run_value(store: Store, unit: list[str], task, metric: str) -> tuple[float, float | None, int | None] | None:
    """One checkpoint's raw metric (from its latest run that has it); a list of tasks is the
    mean (stderr combined as independent)."""
    if isinstance(task, str):
        for run_id in unit:
            got = store.values.get((run_id, task), {}).get(metric)
            if got is not None:
                return got
        return None
    parts = [run_value(store, unit, t, metric) for t in task]
    if any(p is None for p in parts):
        return None
    k = len(parts)
    mean = sum(p[0] for p in parts) / k
    ses = [p[1] for p in parts]
    se = stats.pooled_stderr(ses) if all(s is not None for s in ses) else None
    ns = [p[2] for p in parts]
    return mean, se, (sum(ns) if all(n is not None for n in ns) else None)


def estimate(claim: Claim, store: Store, units: list[list[str]], metric: str) -> Estimate | None:
    """One variant's number in the paper's unit from its units (one per seed), or None without any."""
    per_seed, used, kinds = [], [], []
    acc_like = claim.unit in ACC_UNITS
    for unit in units:
        raw = run_value(store, unit, claim.task, metric)
        if raw is None:
            continue
        v, se, n = raw
        kind = "lm-eval stderr"
        if se is None and acc_like and n and isinstance(claim.task, str):
            se, kind = binomial_stderr(min(max(v, 0.0), 1.0), int(n)), "binomial"
        per_seed.append((v, se, n))
        kinds.append(kind)
        used += [rid for rid in unit if any((rid, t) in store.values for t in claim.leaves)]
    est = combine_seeds(per_seed, acc_like, kinds)
    if est is None:
        return None
    est.value, est.stderr = to_unit(claim.unit, est.value, est.stderr)
    est.run_ids = used
    return est


def estimate_pairs(ev: Evidence, store: Store) -> dict[str, tuple[Estimate | None, Estimate | None]]:
    """Per variant compared with the focus: (the focus's estimate, the other's), both on the metric the
    pair resolved to (None for a side without a number)."""
    c = ev.claim
    out = {}
    for name in c.others:
        metric = ev.metrics[name]
        sides = (c.focus, name)
        out[name] = tuple(estimate(c, store, ev.units[v], metric) if metric else None for v in sides)
    return out
