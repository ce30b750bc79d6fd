"""Whether a diagnostic pair's trailing side was still learning when training stopped (issue 67 item 2), so that more
of its budget could close or flip the gap: "baseline under-trained", a budget effect, not the encoding's (issue 55:
learned PE on flip-flop, 0.63 -> 0.44 nats while RoPE and CoPE sat at 1e-4).

- One-sided: only the side behind on the claim's in-distribution metric (seed means) is read; the side ahead still
  improving only widens the gap.
- Recent slope: least squares over the run's validations in the last :data:`WINDOW` of its steps (>=
  :data:`MIN_VALIDATIONS` of them; fewer: the run's last two validations' losses, judged as a loss-only curve and
  said so in a note — a run that recorded too few validations is never waved through: issue 55's under-trained
  baselines recorded two), of its
  in-distribution accuracy (``train_curve.csv`` ``val_exact_match``) where the curve records it, so that slope and
  gap share a unit; else of its validation loss, judged against claims.yaml's ``converge_tolerance`` relative to
  the loss (no unit to set against the gap: the label says so).
- Blocks only when the side's mean slope, extrapolated over claims.yaml's ``converge_horizon`` of its own steps,
  reaches the gap (closes or flips it); a run at or above ``LEARNED_CEILING`` in-distribution accuracy has learned
  the task and counts as flat.
"""

from __future__ import annotations

from .learned import LEARNED_CEILING, in_distribution_task, seed_values
from .matching import Evidence, Store
from .stats import run_value

#: the trailing share of a run's steps whose validations give its recent slope
WINDOW = 0.3
#: validations a run needs in that window to be judged
MIN_VALIDATIONS = 3


def recent(curve: list[tuple]) -> list[tuple]:
    """The validations of ``curve`` ((step, loss, accuracy or None), step order) in the last :data:`WINDOW` of its
    steps (the last validation's step is the run's length)."""
    if not curve:
        return []
    end = curve[-1][0]
    return [p for p in curve if p[0] >= (1 - WINDOW) * end]


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys on xs (at least two distinct xs)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def _run_slope(curve: list[tuple]) -> tuple[str, float, float, int] | None:
    """(unit 'acc' or 'loss', slope per step, the last value, the run's steps) over :func:`recent`; where fewer
    than :data:`MIN_VALIDATIONS` validations lie there, ('loss2', ...) over its last two validations' losses (what
    a run recording two has: missing validations never turn an unknown into a decision); None below two."""
    pts = recent(curve)
    if len(pts) < MIN_VALIDATIONS:
        if len(curve) < 2 or curve[-1][0] <= curve[-2][0]:
            return None
        (s0, l0), (s1, l1) = (curve[-2][0], curve[-2][1]), (curve[-1][0], curve[-1][1])
        return "loss2", (float(l1) - float(l0)) / (s1 - s0), float(l1), int(s1)
    xs = [float(p[0]) for p in pts]
    if all(len(p) > 2 and p[2] is not None for p in pts):
        return "acc", slope(xs, [float(p[2]) for p in pts]), float(pts[-1][2]), int(pts[-1][0])
    return "loss", slope(xs, [float(p[1]) for p in pts]), float(pts[-1][1]), int(pts[-1][0])


def convergence(ev: Evidence, name: str, store: Store, *, horizon: float | None = None) -> tuple[str, str]:
    """(why the pair is blocked as "baseline under-trained", or ''; a note on runs whose convergence was not
    judged, or ''). Diagnostic claims only."""
    c = ev.claim
    got = in_distribution_task(c)
    if got is None:
        return "", ""
    horizon = c.converge_horizon if horizon is None else horizon
    metric = ev.metrics.get(name) or c.metric
    means = {}
    for side in (c.focus, name):
        vals = seed_values(store, ev.units[side], got[1], metric)
        means[side] = sum(vals) / len(vals) if vals else None
    known = means[c.focus] is not None and means[name] is not None
    gap = abs(means[c.focus] - means[name]) if known else None
    if known and gap > 0:
        trailing = [c.focus if means[c.focus] < means[name] else name]  # accuracies: the lower is behind
    else:
        trailing = [c.focus, name]  # no gap to read: either side's training could move it
    blocks, unjudged = [], []
    for side in trailing:
        judged = []
        for unit in ev.units[side]:
            run = store.runs.get(unit[0], {}) if unit else {}
            acc = run_value(store, unit, got[1], metric)
            if acc is not None and float(acc[0]) >= LEARNED_CEILING:
                judged.append(("acc", 0.0, float(acc[0]), 1))  # learned: flat, whatever its loss still does
                continue
            curve = store.curves.get(str(run.get("checkpoint")), [])
            s = _run_slope(curve)
            if s is None or s[0] == "loss2":
                unjudged.append(f"{side} seed {run.get('seed')}: {len(recent(curve))} validations in the last "
                                f"{WINDOW:.0%} of its steps")  # fmt: skip
            if s is not None:
                judged.append(s)
        if not judged:
            continue
        n, k = len(judged), sum(1 for j in judged if j[0] != "acc")
        if k == 0:  # accuracies: the gain over the horizon against the gap, one unit
            gain = sum(sl * horizon * steps for _, sl, _, steps in judged) / n
            per_k = sum(sl for _, sl, _, _ in judged) / n * 1000
            if gain > 0 and (gap is None or gain >= gap):
                blocks.append(f"{side} behind, its in-distribution accuracy rising {per_k:+.3g} per 1,000 steps "
                              f"(least squares over its validations in the last {WINDOW:.0%} of its steps, mean of "
                              f"{n} runs): {gain:+.3f} over {horizon:g} of its steps, enough to close or flip the "
                              "gap")  # fmt: skip
        else:  # a curve of losses only: a fall relative to the loss (no unit to set against the gap)
            loss_runs = [j for j in judged if j[0] != "acc"]
            two = sum(1 for j in loss_runs if j[0] == "loss2")
            fall = sum(-sl * horizon * steps / max(last, 1e-12) for _, sl, last, steps in loss_runs) / k
            per_k = sum(sl for _, sl, _, _ in loss_runs) / k * 1000
            how = (f"least squares over its validations in the last {WINDOW:.0%} of its steps" if not two else
                   f"{two} of its {k} runs judged on their last two validations only, fewer than {MIN_VALIDATIONS} "
                   f"lying in the last {WINDOW:.0%} of their steps")  # fmt: skip
            if fall > c.converge_tolerance:
                blocks.append(f"{side} behind, its validation loss falling {per_k:+.3g} nats per 1,000 steps ({how}, "
                              f"mean of {k} runs): {fall:.1%} of its loss over {horizon:g} of its steps, above "
                              f"claims.yaml converge_tolerance = {c.converge_tolerance:g} relative to the loss (its "
                              "curve records losses only, no accuracy to set against the gap)")  # fmt: skip
    note = (f"convergence judged on each run's last two validations at most (the rule needs {MIN_VALIDATIONS} in the "
            f"last {WINDOW:.0%} of its steps): " + ", ".join(unjudged) if unjudged else "")  # fmt: skip
    if not blocks:
        return "", note
    shown = (f"; gap {c.focus} − {name} = {means[c.focus] - means[name]:+.3f} ({metric} on {got[1]}, seed means)"
             if known else "; no gap to read (a side without an in-distribution number)")  # fmt: skip
    why = (f"not learned at this scale: baseline under-trained ({', '.join(trailing)} behind and still improving at "
           f"the end of training, extrapolated over claims.yaml converge_horizon = {horizon:g} of its steps): "
           + "; ".join(blocks) + shown)  # fmt: skip
    return why, note
