"""What a decided pair's verdict rests on (issue 67 item 3): its test's error rate at the pair's own spreads, and
three choices the verdict could depend on. One row per decided pair (table ``claims_sensitivity``, the claims page).

- **Calibrated error rate** (:func:`simulated_rates`): the A/A split tests one encoding against itself, equal
  variances by construction, and cannot be made at all where a group has fewer than 4 runs (the cpu board: 3 seeds
  an encoding). So each decided pair's nulls are simulated instead: both sides normal with one mean, each side with
  its observed standard deviation and number of runs, ``DRAWS`` draws at a fixed seed; the rate is the share that
  Welch's t (the test used, ``decision.welch_t``) rejects at alpha, with its Clopper–Pearson interval, and beside it
  pooled t's on the same draws (3 vs 3 at a 5.8x sd ratio: pooled ~0.093, Welch ~0.058).
- **Welch vs pooled**: the pair's p under Student's pooled t, Holm-adjusted in its paper's family with every tested
  pair of that family re-tested the same way, and the verdict that gives.
- **Per-paper vs store-wide family**: the pair's Welch p Holm-adjusted over every pair of the store with a p-value.
- **The second model size**: the same pair on the store's runs of another size (``runs.size``, the ladder's rungs,
  e.g. 4x32): Welch's p, unadjusted (one pair), no gate applied; or "no second size".

Reported, never used to decide: the verdict is the one of ``verdicts`` (Welch's t, the paper's family).
"""

from __future__ import annotations

import dataclasses
import statistics

from . import decision as D
from . import replication as R
from .matching import Evidence, Store, find_runs

#: simulated nulls per decided pair (Monte Carlo standard error at alpha 0.05: 0.0015)
DRAWS = 20_000
#: the simulation's seed (fixed: the same store gives the same rates)
SEED = 67
DECIDED = ("reproduced", "contradicted")


def simulated_rates(sd_f: float, sd_o: float, n_f: int, n_o: int, alpha: float = D.ALPHA, draws: int = DRAWS,
                    seed: int = SEED) -> tuple[float, float]:  # fmt: skip
    """(Welch's t's rejection rate, pooled t's) at ``alpha`` over ``draws`` nulls: n_f values N(0, sd_f²) against
    n_o values N(0, sd_o²). A draw with no spread on either side has no p-value and is no rejection."""
    import numpy as np
    from scipy.stats import ttest_ind

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((draws, n_f)) * sd_f
    y = rng.standard_normal((draws, n_o)) * sd_o
    rates = []
    for equal_var in (False, True):
        with np.errstate(divide="ignore", invalid="ignore"):
            p = ttest_ind(x, y, axis=1, equal_var=equal_var).pvalue
        rates.append(float(np.mean(np.nan_to_num(p, nan=1.0) < alpha)))
    return rates[0], rates[1]


def pair_p(ev: Evidence, name: str, store: Store, test=D.welch_t) -> tuple[float | None, R.RunsComparison | None]:
    """The pair's p-value as ``verdicts`` computes it, under ``test`` (None: fewer than ``decision.MIN_RUNS`` runs
    a side, or no spread), and the comparison it came from."""
    c = ev.claim
    if not ev.metrics.get(name):
        return None, None
    runs, _ = R.compare(c, store, ev.units[c.focus], ev.units[name], ev.metrics[name], test=test)
    if runs is None or runs.se <= 0:
        return None, runs
    _, _, kind = c.against(name)
    exact = D.two_sided_p(runs.diff, runs.se, runs.df) if kind != "equal" else None
    return D.p_value(runs.shown, runs.shown_se, runs.df, kind, c.tolerance, exact), runs


def _verdict(ev: Evidence, name: str, runs: R.RunsComparison, p: float, alpha: float) -> str:
    c = ev.claim
    _, sign, kind = c.against(name)
    return D.verdict(runs.shown, runs.shown_se, c.higher_is_better, sign, kind, c.tolerance, runs.df, p=p, alpha=alpha)


def _second_sizes(store: Store) -> list[str]:
    return sorted({str(r["size"]) for r in store.runs.values() if r.get("size") is not None})


def _size_evidence(evidence: list[Evidence], store: Store, size: str) -> tuple[dict[str, Evidence], Store]:
    """Every claim's evidence among the runs of model size ``size`` alone (their own store: the ladder's rungs as
    the only runs; every claim passed, so that an ablation run is never taken for a default one)."""
    runs = {rid: {**r, "size": None} for rid, r in store.runs.items() if str(r.get("size")) == size}
    sub = dataclasses.replace(store, runs=runs)
    return {e.claim.id: e for e in find_runs([e.claim for e in evidence], sub)}, sub


def _at_size(ev: Evidence, ev2: Evidence, name: str, sub: Store, size: str, alpha: float) -> dict:
    """The pair ``ev``/``name`` at another model size: ``ev2``, its evidence in ``sub`` (:func:`_size_evidence`)."""
    p, cmp = pair_p(ev2, name, sub)
    if p is None:
        n = [len(ev2.units[s]) for s in (ev.claim.focus, name)]  # one unit per seed with the claim's task
        why = f"{n[0]} vs {n[1]} runs" if min(n) < D.MIN_RUNS else "no spread over runs"
        return {"second_size": size, "second_note": f"{size}: no test ({why})"}
    v = _verdict(ev2, name, cmp, p, alpha)
    note = f"{size}: difference {cmp.shown:+.4g}, Welch p {p:.2g} (unadjusted, {cmp.runs[0]} vs {cmp.runs[1]} runs) "
    return {"second_size": size, "p_second": p, "diff_second": cmp.shown, "verdict_second": v, "second_note": note + v}


def sensitivity_rows(evidence: list[Evidence], store: Store, rows: list[dict], alpha: float = D.ALPHA) -> list[dict]:
    """The ``claims_sensitivity`` rows of the decided pairs of ``rows`` (``verdicts.evaluate_claims``' rows, after
    Holm; a row's ``family``/``p_adjusted`` tell which pairs were in its paper's family and tested)."""
    pairs = {ev.claim.pair_id(name): (ev, name) for ev in evidence for name in ev.claim.others}
    decided = [r for r in rows if r["verdict"] in DECIDED and r["claim_id"] in pairs]
    if not decided:
        return []
    pooled = {}
    for r in rows:
        if r.get("p_adjusted") is not None and r["claim_id"] in pairs:
            pooled[r["claim_id"]] = pair_p(*pairs[r["claim_id"]], store, test=D.student_t)[0]
    store_ids = [r["claim_id"] for r in rows if r.get("p_value") is not None]
    store_adj = dict(zip(store_ids, D.holm([r["p_value"] for r in rows if r.get("p_value") is not None]), strict=True))
    sizes = _second_sizes(store)
    second = _size_evidence(evidence, store, sizes[0]) if sizes else None
    out = []
    for r in decided:
        ev, name = pairs[r["claim_id"]]
        c = ev.claim
        f = R.run_values(c, store, ev.units[c.focus], ev.metrics[name])
        o = R.run_values(c, store, ev.units[name], ev.metrics[name])
        sd_f, sd_o = statistics.stdev(f), statistics.stdev(o)
        welch, pooled_rate = simulated_rates(sd_f, sd_o, len(f), len(o), alpha)
        lo, hi = D.clopper_pearson(round(welch * DRAWS), DRAWS)
        row = {"claim_id": r["claim_id"], "n_focus": len(f), "n_other": len(o), "sd_focus": sd_f,
               "sd_other": sd_o, "draws": DRAWS, "welch_rate": welch, "welch_lo": lo, "welch_hi": hi,
               "pooled_rate": pooled_rate}  # fmt: skip
        fam = [x for x in rows if x.get("family") == r["family"] and x["paper"] == r["paper"]]
        ps = [pooled.get(x["claim_id"]) if x.get("p_adjusted") is not None else None for x in fam]
        adj = D.holm([1.0 if p is None else p for p in ps])
        i = [x["claim_id"] for x in fam].index(r["claim_id"])
        p_pool, cmp = pair_p(ev, name, store, test=D.student_t)
        row.update(p_pooled=p_pool, p_pooled_adjusted=adj[i], verdict_pooled=_verdict(ev, name, cmp, adj[i], alpha))
        _, welch_cmp = pair_p(ev, name, store)
        row.update(store_m=len(store_ids), p_store_adjusted=store_adj[r["claim_id"]],
                   verdict_store=_verdict(ev, name, welch_cmp, store_adj[r["claim_id"]], alpha))  # fmt: skip
        if second:
            row.update(_at_size(ev, second[0][c.id], name, second[1], sizes[0], alpha))
        else:
            row["second_note"] = "no second size"
        out.append(row)
    return out
