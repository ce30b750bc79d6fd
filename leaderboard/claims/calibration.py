"""A/A calibration (issue 55): every test the claims use, run on groups of runs that differ only by their seed.

For every group of runs the claims compare (one variant of a claim: the same encoding, options, setting and
metric; one run per seed), the runs are split by seed order into two halves (the first ⌊n/2⌋ seeds vs the rest)
and the claims' test is run on the two halves as if they were two encodings. There is no difference to find, so
a calibrated test rejects at ``alpha`` about ``alpha`` of the time. The table gives each test's rate with its
exact (Clopper–Pearson) 95 % interval; a test whose interval lies wholly above ``alpha`` decides nothing
(``verdicts``: its pairs are "not decidable here" and say why).

The per-document and per-example tests the claims used before issue 55 (one run per side, the uncertainty over
documents or examples) are run on every pair of seeds of a group too, so the table shows why they were retired;
they decide nothing whatever their rate.
"""

from __future__ import annotations

import itertools

from . import decision as D
from . import paired as P
from . import replication as R
from .matching import Evidence, Store

#: the retired one-run-per-side tests, shown for comparison (never used to decide)
RETIRED = ("paired-docs, 1 run per side (retired)", "mcnemar, 1 run per side (retired)")


def groups(evidence: list[Evidence]) -> list[tuple]:
    """(claim, units, metric) once per distinct group of runs x task x metric the claims compare."""
    seen, out = set(), []
    for ev in evidence:
        c = ev.claim
        for name in c.others:
            metric = ev.metrics.get(name)
            if not metric:
                continue
            for side in (c.focus, name):
                units = [u for u in ev.units[side] if u]
                key = (tuple(u[0] for u in units), c.task_label(), metric)
                if len(units) >= 2 and key not in seen:
                    seen.add(key)
                    out.append((c, units, metric))
    return out


def _row(test: str, compared: str, ps: list[float], alpha: float, used: bool) -> dict:
    k, n = sum(p < alpha for p in ps), len(ps)
    lo, hi = D.clopper_pearson(k, n)
    rate = k / n if n else None
    return {"test": test, "compared": compared, "groups": n, "rejections": k, "rate": rate, "lo": lo, "hi": hi,
            "decides": used and not (n and lo > alpha)}  # fmt: skip


def aa_table(evidence: list[Evidence], store: Store, alpha: float = D.ALPHA) -> list[dict]:
    """The A/A rows: the claims' test over runs (``replication``), then the retired tests."""
    runs_t, docs, mcnemar = [], [], []
    for c, units, metric in groups(evidence):
        vals = R.run_values(c, store, units, metric)
        if len(vals) >= 4:  # Welch's t needs two runs a side
            half = len(vals) // 2
            diff, se, df = D.welch_t(vals[:half], vals[half:])
            if se > 0:
                runs_t.append(D.two_sided_p(diff, se, df))
        if not isinstance(c.task, str):
            continue
        for a, b in itertools.combinations(units, 2):
            if c.unit == "ppl":
                got, _ = P.compare_ppl(store, c.task, metric, [a], [b])
                if got is not None and got[1] > 0:
                    docs.append(D.two_sided_p(got[0], got[1], got[2]))
            else:
                pair, _ = P.compare(store, c.task, metric, [a], [b])
                if pair is not None and pair.test == "mcnemar" and pair.p is not None:
                    mcnemar.append(pair.p)
    return [
        _row(R.TEST, "first half of a group's seeds vs the rest (2 vs 2, 2 vs 3 runs)", runs_t, alpha, True),
        _row(RETIRED[0], "every pair of seeds of a group, over documents", docs, alpha, False),
        _row(RETIRED[1], "every pair of seeds of a group, over examples", mcnemar, alpha, False),
    ]
