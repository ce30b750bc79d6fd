"""The step-0 untrained controls (issue 67 items 1 and 5): every verdict beside its own untrained control.

``peeval train`` saves each run's initial weights (the same seed, before the first update) in ``<out>/step0/``
with ``"control": "step0"`` in its ``train_summary.json``; the pipeline evaluates that checkpoint with the run's own
tasks and ingest stores it as a run of its own, which ``matching.read_store`` keeps in ``Store.controls``, never
among the runs a claim counts as seeds.

- :func:`control_store`: the controls *as if trained*: each control run carries its trained run's record
  (training summary, budget, curve, name), its outcomes its own. The claims judge it by the same rule as the
  store (``verdicts.evaluate_claims``: gates, test, family, Holm).
- :func:`label_architecture`: a pair that its controls also decide, the same way (reproduced or contradicted), holds
  at initialisation: it is the architecture's (TAPE's shift invariance is Prop. 4.2 at any weights), never evidence of
  training, and is shown as :data:`AT_INIT` with both numbers.
- :func:`positive_control`: the claim's own measurement on a pair that can only differ after training, the focus
  encoding trained vs its step-0 controls: it passes when that test separates them at ``ALPHA``; it fails on a store
  whose "trained" runs are untrained.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath

from . import decision as D
from . import replication as R
from .matching import Evidence, Store, find_runs
from .schema import Claim

#: the verdict of a pair its step-0 controls decide too
AT_INIT = "holds at initialisation (architecture)"
#: a training summary's ``control`` value of a step-0 control (``peeval.training.pretrain.STEP0_CONTROL``)
STEP0 = "step0"
DECIDED = ("reproduced", "contradicted")


def is_control(run: dict) -> bool:
    """A run of a step-0 control checkpoint (its training summary says so)."""
    return (run.get("summary") or {}).get("control") == STEP0


def trained_checkpoint(control: dict) -> str | None:
    """The checkpoint key of the run a control belongs to (its summary's ``control_of``, relative to its folder)."""
    s, ck = control.get("summary") or {}, control.get("checkpoint")
    if not ck or not isinstance(s.get("control_of"), str):
        return None
    parts = []
    for p in (PurePosixPath(str(ck)) / s["control_of"]).parts:
        if p == "..":
            if not parts:
                return None
            parts.pop()
        elif p != ".":
            parts.append(p)
    return str(PurePosixPath(*parts)) if parts else None


def control_store(store: Store) -> Store | None:
    """The controls as if trained (None: no control of a trained run in ``store``): each keeps its run id and
    outcomes and takes its trained run's record (summary, efficiency, checkpoint for its curve, name), so every
    gate on the record (budget, convergence) reads the trained run's and only outcomes can differ."""
    by_ckpt = {}
    for r in store.runs.values():
        by_ckpt.setdefault(str(r.get("checkpoint")), r)
    runs = {}
    for cid, c in store.controls.items():
        t = by_ckpt.get(str(trained_checkpoint(c)))
        if t is None:
            continue  # a control whose trained run is not in this store: nothing to stand beside
        runs[cid] = {**c, "name": t.get("name"), "checkpoint": t.get("checkpoint"), "summary": t.get("summary"),
                     "efficiency": t.get("efficiency"), "control_of": t["run_id"]}  # fmt: skip
    if not runs:
        return None
    return dataclasses.replace(store, runs=runs, controls={}, samples={})


def _number(row: dict) -> str:
    diff, se, p = row.get("peeval_value"), row.get("stderr"), row.get("p_adjusted")
    if diff is None:
        return "no number"
    out = f"{diff:+.4g}" + (f" ± {se:.3g}" if se is not None else "")
    return out + (f" (Holm p {p:.3g})" if p is not None else "")


def label_architecture(rows: list[dict], control_rows: list[dict]) -> None:
    """Relabel every decided pair whose step-0 controls, judged by the same rule, decide it the same way:
    :data:`AT_INIT`, with the trained and the step-0 numbers (controls decided the other way: training flipped it,
    the verdict stands). Every other measured pair shows its controls' verdict and number."""
    ctrl = {r["claim_id"]: r for r in control_rows}
    for r in rows:
        if r["verdict"] == "not measured":
            continue
        c = ctrl.get(r["claim_id"])
        if c is None or c["verdict"] == "not measured":
            r["setting_diff"] += " | step-0 control: not measured"
        elif r["verdict"] in DECIDED and c["verdict"] == r["verdict"]:
            r["setting_diff"] += (f" | {AT_INIT}: its step-0 controls are {c['verdict']} by the same rule "
                                  f"(trained {_number(r)}; step 0 {_number(c)}): the encoding's formula, not "
                                  f"training, gives it (was {r['verdict']})")  # fmt: skip
            r["verdict"] = AT_INIT
        else:
            r["setting_diff"] += f" | step-0 control: {c['verdict']} ({_number(c)})"


def _units(ev: list[Evidence], claim: Claim) -> dict[str, list[list[str]]]:
    return next((e.units for e in ev if e.claim.id == claim.id), {})


def positive_control(claim: Claim, store: Store, controls: Store | None = None, alpha: float = D.ALPHA) -> tuple:
    """(passed, note): the claim's own measurement (its task, metric, scale and Welch's t over runs) on the focus
    encoding trained vs its step-0 controls. Passes when the difference is significant at ``alpha``: the
    instrument separates a pair that can only differ after training. None for ``passed`` when there are no
    controls or too few runs to test."""
    controls = control_store(store) if controls is None else controls
    if controls is None:
        return None, "no step-0 controls in this store"
    ev = find_runs([claim], store)
    evc = find_runs([claim], controls)
    if not ev or not evc:
        return None, "no runs of the claim"
    e = ev[0]
    metric = next(iter(e.metrics.values()), None) or claim.metric
    trained, step0 = e.units.get(claim.focus, []), _units(evc, claim).get(claim.focus, [])
    got, why = R.compare(claim, store, trained, step0, metric)
    if got is None:
        return None, f"trained vs step 0 of {claim.focus}: {why}"
    p = D.two_sided_p(got.diff, got.se, got.df) if got.se > 0 else (0.0 if got.diff != 0 else 1.0)
    note = (f"trained vs step 0 of {claim.focus} on {metric}: {got.shown:+.4g} ± {got.shown_se:.3g}, p {p:.3g} "
            f"({got.runs[0]} + {got.runs[1]} runs)")  # fmt: skip
    return p < alpha, note
