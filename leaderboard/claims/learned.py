"""Whether a diagnostic pair can carry a verdict at all (issue 44), checked before any test:

- *learned*: a diagnostic task is "learned" by a side when its in-distribution accuracy (the claim's metric on
  the task's ``test`` split, mean over seeds) beats the majority-answer baseline (the share of the most common
  answer of the generator's ``test`` split with the claim's ``run_params``) by ``learned_margin`` (claims.yaml,
  fixed before the runs were looked at). The sweep's criterion (>= 0.9 in distribution) is not used: the papers'
  own in-distribution contrasts have a baseline far below it (CoPE table 2: RoPE 40 % selective-copy error;
  PoPE table 1: RoPE 11 % indirect-indexing accuracy), and a side that learned nothing is what the rule must
  exclude. Which sides: both on a claim about an OOD split (how what was learned in distribution generalises:
  a side that learned nothing fails OOD for another reason); the focus on an in-distribution claim, whose
  paper contrast is the other side failing to learn (CoPE table 3's absolute PE, 68 % counting error at 3
  variables, is below the majority answer even in the paper). A pair failing it is "not learned at this
  scale" (the row gives the sides' numbers and the baseline), no test in Holm's family;
- *no contrast*: both sides at the same floor or ceiling (0 or 1) on every seed, or a difference of exactly 0
  with no uncertainty: "no contrast at this setting", no test in Holm's family either.

Reads the generators (pure Python), never torch.
"""

from __future__ import annotations

import collections
import functools
import json

from peeval import records

from .matching import Evidence, Store
from .schema import ACC_UNITS, Claim
from .stats import run_value

#: examples of the generator's test split the majority-answer baseline is counted on
BASELINE_EXAMPLES = 2000


def in_distribution_task(c: Claim) -> tuple[str, str] | None:
    """(the diagnostic task, its in-distribution split's lm-eval task) of a diagnostic claim, else None."""
    if not isinstance(c.task, str) or not c.task.startswith(records.DIAG_PREFIX):
        return None
    rest = c.task[len(records.DIAG_PREFIX) :]
    for name in sorted(records.DIAG_TASKS, key=len, reverse=True):
        if rest.startswith(name + "_"):
            return name, records.diag_task(name, "test")
    return None


@functools.cache
def _majority(task: str, params: str) -> float:
    from peeval.tasks.diagnostics import generators

    kw = {k: v for k, v in json.loads(params).items() if k in generators.params(task)}
    answers = [e["answer"] for e in generators.generate(task, "test", BASELINE_EXAMPLES, seed=0, **kw)]
    return collections.Counter(answers).most_common(1)[0][1] / len(answers)


def majority_baseline(c: Claim) -> float | None:
    """The share of the most common answer of the claim's task in distribution (None: no diagnostic claim)."""
    got = in_distribution_task(c)
    return None if got is None else _majority(got[0], json.dumps(c.run_params, sort_keys=True))


def seed_values(store: Store, units: list[list[str]], task, metric: str) -> list[float]:
    """One raw value (peeval's metric, accuracies in [0, 1]) per seed with a number."""
    out = []
    for unit in units:
        got = run_value(store, unit, task, metric)
        if got is not None:
            out.append(float(got[0]))
    return out


def not_learned(ev: Evidence, name: str, store: Store) -> str:
    """Why the pair focus vs ``name`` is "not learned at this scale" ('' when the sides the rule asks for learned
    the task, or the claim is no diagnostic one)."""
    c = ev.claim
    got = in_distribution_task(c)
    metric = ev.metrics.get(name) or c.metric
    if got is None or c.unit not in ACC_UNITS:
        return ""
    base = majority_baseline(c)
    need = base + c.learned_margin
    bits, short = [], False
    sides = (c.focus,) if c.task == got[1] else (c.focus, name)  # in distribution: the focus; OOD: both
    for side in sides:
        vals = seed_values(store, ev.units[side], got[1], metric)
        if not vals:
            bits.append(f"{side}: no in-distribution number")
            short = True
            continue
        mean = sum(vals) / len(vals)
        short |= mean < need
        bits.append(f"{side} {mean:.3f}")
    if not short:
        return ""
    return (
        f"not learned at this scale: in-distribution {metric} ({got[1]}) {', '.join(bits)}; the criterion is "
        f"the majority answer's {base:.3f} + {c.learned_margin:g} = {need:.3f} (claims.yaml learned_margin)"
    )


def no_contrast(ev: Evidence, name: str, store: Store, diff: float | None, se: float | None) -> str:
    """Why the pair has "no contrast at this setting" ('' when it has one)."""
    c = ev.claim
    metric = ev.metrics.get(name) or c.metric
    if c.unit in ACC_UNITS:
        sides = [seed_values(store, ev.units[v], c.task, metric) for v in (c.focus, name)]
        vals = [x for s in sides for x in s]
        if all(sides) and (all(x == 0.0 for x in vals) or all(x == 1.0 for x in vals)):
            bound = "floor (0)" if vals[0] == 0.0 else "ceiling (1)"
            return f"no contrast at this setting: both sides at the {bound} of {metric} on every seed"
    if diff == 0.0 and se == 0.0:
        return "no contrast at this setting: a difference of exactly 0 with no uncertainty"
    return ""
