"""The training run as the unit of replication (issue 55): one number per run, one test over runs.

Documents and examples give each run its estimate (a perplexity over documents, an accuracy over examples) and
that estimate's precision, never the replication: two seeds of one encoding differ by far more than their
documents' spread says (the published cpu-claims store: RoPE seed 0 vs seed 2 at 4,096 tokens, Δ log ppl 0.25,
p = 1e-10 over documents). So a pair is compared over its runs:

- each side's runs (one per seed, :func:`run_values`): the claim's metric of each run, in the test's scale —
  the log of a perplexity (the ratio is what the papers compare), else the paper's unit;
- :func:`compare`: Welch's two-sample t over those values (``decision.welch_t``: the Welch–Satterthwaite df,
  fixed by the design; issue 67: pooled t does not hold α when the sides' spreads differ), when each side has
  ``decision.MIN_RUNS`` runs; else ``(None, "not decidable here: N runs per side")``.

The old per-document and per-example tests (``paired``) are kept for the A/A table only (``calibration``),
which shows what they do when two groups differ by their seed alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import decision as D
from .matching import Store
from .schema import Claim
from .stats import run_value, to_unit

#: the name of the one test over runs (claims.test)
TEST = "runs-t"


def test_scale(claim: Claim, raw: float) -> float | None:
    """One run's raw metric in the scale the test compares: log perplexity for ppl, else the paper's unit."""
    if claim.unit == "ppl":
        return math.log(raw) if raw > 0 and math.isfinite(raw) else None
    v = to_unit(claim.unit, raw, None)[0]
    return v if math.isfinite(v) else None


def run_values(claim: Claim, store: Store, units: list[list[str]], metric: str) -> list[float]:
    """One value per run (unit = one seed's runs, the latest with the metric first), in :func:`test_scale`."""
    out = []
    for unit in units:
        got = run_value(store, unit, claim.task, metric)
        if got is None:
            continue
        v = test_scale(claim, float(got[0]))
        if v is not None:
            out.append(v)
    return out


@dataclass
class Difference:
    """One comparison of a claim in the paper's unit: focus − other, its standard error, the paired test's
    p-value where it decides, which test (``claims.test``), and what the setting column says about it."""

    diff: float | None
    se: float | None
    p: float | None  # an exact p-value where the test gives one (McNemar), else None: from diff / se / df
    test: str | None
    notes: list[str]
    #: degrees of freedom of the t behind ``se`` (None: normal, many examples, or exact)
    df: float | None = None
    #: why the pair has no test at all ('' when it has one): fewer than ``decision.MIN_RUNS`` runs per side
    undecidable: str = ""


@dataclass
class RunsComparison:
    """focus − other over runs: in the test's scale (``diff``, ``se``, ``df``) and in the paper's unit (``shown``:
    for perplexity the difference of the geometric means over runs, whose sign is the log difference's)."""

    diff: float
    se: float
    df: float
    runs: tuple[int, int]
    shown: float
    shown_se: float
    notes: list[str] = field(default_factory=list)


def compare(
    claim: Claim, store: Store, focus_units, other_units, metric: str, test=D.welch_t
) -> tuple[RunsComparison | None, str]:
    """The comparison over runs, or (None, why not: "not decidable here: ..." when a side has too few runs).
    ``test``: ``decision.welch_t``, the claims' test; ``decision.student_t`` only for the sensitivity beside it."""
    f = run_values(claim, store, focus_units, metric)
    o = run_values(claim, store, other_units, metric)
    if min(len(f), len(o)) < D.MIN_RUNS:
        why = f"not decidable here: {len(f)} vs {len(o)} runs per side (each side needs >= {D.MIN_RUNS} "
        return None, why + "independently trained runs: documents and examples are no replications of a training run)"
    diff, se, df = test(f, o)
    if claim.unit == "ppl":
        gf, go = math.exp(sum(f) / len(f)), math.exp(sum(o) / len(o))
        shown, shown_se = gf - go, gf * se  # the delta method: d ppl = ppl d log ppl
        note = f"log-ppl difference {diff:+.4f} ± {se:.4f} over runs; shown: geometric means over runs"
    else:
        shown, shown_se, note = diff, se, f"difference {diff:+.4g} ± {se:.4g} over runs"
    name = "Welch's t" if test is D.welch_t else "pooled t"
    note += f"; {name} on {df:.3g} df ({len(f)} + {len(o)} runs)"
    return RunsComparison(diff, se, df, (len(f), len(o)), shown, shown_se, [note]), ""


def differences(ev, ests: dict, store: Store) -> dict:
    """Per variant compared with the focus: a :class:`Difference` over runs (``diff`` and ``se`` in the
    paper's unit, ``p`` decided in the test's scale), or one with ``undecidable`` saying why there is no test."""
    c = ev.claim
    out = {}
    for name in c.others:
        (fe, oe), notes = ests[name], []
        for side, e in ((c.focus, fe), (name, oe)):
            if e is None:
                notes.append(f"no peeval number for {side} ({c.variants[side].label()})")
        if fe is None or oe is None:
            out[name] = Difference(None, None, None, None, notes)
            continue
        runs, why = compare(c, store, ev.units[c.focus], ev.units[name], ev.metrics[name])
        if runs is None:
            out[name] = Difference(fe.value - oe.value, None, None, None, [*notes, why], undecidable=why)
            continue
        p = None
        if c.against(name)[2] != "equal":
            p = D.two_sided_p(runs.diff, runs.se, runs.df) if runs.se > 0 else None
        if runs.se == 0:
            runs.notes.append("no spread over runs: no p-value")
        se = runs.shown_se if runs.se > 0 else None  # no spread over runs is no certainty: no p-value
        out[name] = Difference(runs.shown, se, p, TEST, [*notes, *runs.notes], runs.df)
    return out
