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
import math

from peeval import records

from .matching import Evidence, Store
from .schema import ACC_UNITS, Claim
from .stats import run_value

#: examples of the generator's test split the majority-answer baseline is counted on
BASELINE_EXAMPLES = 2000
#: a run at or above this in-distribution accuracy has learned its task: never "not learned", and a falling loss
#: there is polish, never "still improving" (issue 67: CoPE selective copy seed 2, 0.1958 -> 0.0005 nats at
#: accuracy 1.00, was flagged)
LEARNED_CEILING = 0.99


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
    """Why the pair focus vs ``name`` is "not learned at this scale" ('' when every run of the sides the rule asks
    for learned the task, or the claim is no diagnostic one). Per run, not on the mean of seeds (issue 55): one
    run of a side below the criterion is a side that did not learn the task at this scale."""
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
        below = sum(v < need and v < LEARNED_CEILING for v in vals)  # a run at the ceiling learned it, whatever
        # the majority answer (issue 67)
        short |= below > 0
        bits.append(f"{side} {' '.join(f'{v:.3f}' for v in vals)} ({below} of {len(vals)} runs below)")
    if not short:
        return ""
    return (
        f"not learned at this scale: in-distribution {metric} ({got[1]}) per run {'; '.join(bits)}; the criterion, "
        f"for every run, is the majority answer's {base:.3f} + {c.learned_margin:g} = {need:.3f} (claims.yaml "
        f"learned_margin), or {LEARNED_CEILING:g}"
    )


def text_pretraining(summary: dict) -> bool:
    """A ``peeval train`` text-pretraining summary (an encoding, no diagnostic task, no adapt method)."""
    s = summary or {}
    return s.get("pe") is not None and s.get("task") is None and s.get("method") is None and "tokens" in s


def _positive(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < math.inf else None


def lm_not_learned(ev: Evidence, name: str, store: Store) -> str:
    """Why the pair's language models are "not learned at this scale" ('' when every text-pretrained run of both
    sides learned, or none is one): judged by outcome (issue 67), a run learned when its final validation log
    perplexity is below its unigram log perplexity (``unigram_val_ppl``: the training tokens' frequencies scored on
    the validation tokens, both in its training summary) by claims.yaml's ``lm_learned_margin``; a run recording
    neither is no evidence that it learned. Any claim on such models, not only perplexity ones: an untrained model
    has no property worth comparing. The final validation ppl is the run's outcome: its curve's last validation
    (``train_val`` ppl), else its summary's ``final_val_ppl``. A step-0 control is judged with its trained run's
    record (``controls.control_store`` copies its summary): this gate asks whether the pair's models were trained;
    the control's outcomes on the claim's metric are its own, so a pair that holds at initialisation still shows
    as such, and a control is never "not learned" for being untrained, which it is by design."""
    c = ev.claim
    bits = []
    for side in (c.focus, name):
        for unit in ev.units[side]:
            r = store.runs.get(unit[0], {}) if unit else {}
            s = r.get("summary") or {}
            if not text_pretraining(s):
                continue
            scored = None if r.get("control_of") else run_value(store, unit, "train_val", "ppl")  # its curve's last
            # validation, an outcome (a control: its trained run's record, below)
            ppl = _positive(scored[0] if scored else s.get("final_val_ppl"))
            uni = _positive(s.get("unigram_val_ppl"))
            if ppl is None or uni is None:
                bits.append(f"{side} seed {r.get('seed')}: no final validation ppl and unigram ppl recorded")
            elif (gain := math.log(uni) - math.log(ppl)) < c.lm_learned_margin:
                bits.append(f"{side} seed {r.get('seed')}: validation ppl {ppl:.4g} vs unigram {uni:.4g} "
                            f"({gain:+.3f} nats)")  # fmt: skip
    if not bits:
        return ""
    return (f"not learned at this scale: a language model learned when its final validation log ppl is below its "
            f"unigram log ppl by claims.yaml lm_learned_margin = {c.lm_learned_margin:g} nats: "
            + "; ".join(bits))  # fmt: skip


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


#: the task an extension's gate reads: perplexity at its new training length (the ppl_ext suite's first corpus)
EXTENSION_TASK = "peeval_ppl_pg19"


def _base_value(store: Store, base: str, metric: str) -> float | None:
    """The unextended base checkpoint's ``metric`` on :data:`EXTENSION_TASK` (a pretraining run of the store whose
    checkpoint path ends with ``base``, the extension's ``model_args.pretrained``), or None."""
    want = "/" + str(base).strip("/")
    for rid, r in store.runs.items():
        ck = "/" + str(r.get("checkpoint") or "").strip("/")
        if r.get("kind") == "pretrain" and ck.endswith(want):
            got = store.values.get((rid, EXTENSION_TASK), {}).get(metric)
            if got is not None:
                return float(got[0])
    return None


def extension_not_learned(ev: Evidence, name: str, store: Store) -> str:
    """Why an extension pair is "not learned at this scale" ('' when every extension run of both sides learned the
    new length, or the sides are no extensions of a peeval-pretrained model): an extension whose perplexity at its
    new training length (``adapt.seq_len``, on :data:`EXTENSION_TASK`) is not below the unextended base's there by
    claims.yaml's ``extension_margin`` (in log ppl) learned nothing the claim can compare (issue 55: TAPE's adapter,
    loss 4.02 -> 3.95)."""
    c = ev.claim
    bits, checked = [], False
    for side in (c.focus, name):
        for unit in ev.units[side]:
            r = store.runs.get(unit[0], {}) if unit else {}
            params = r.get("params") or {}
            adapt, base = params.get("adapt") or {}, (params.get("model_args") or {}).get("pretrained")
            if not params.get("base_train") or not adapt.get("seq_len") or not base:
                continue
            checked = True
            metric = f"ppl@{int(adapt['seq_len'])}"
            same = [rid for rid, rr in store.runs.items() if rr.get("checkpoint") == r.get("checkpoint")]
            got = run_value(store, [*unit, *same], EXTENSION_TASK, metric)  # its perplexity run, beside this task's
            ref = _base_value(store, base, metric)
            if got is None or ref is None:
                bits.append(f"{side} seed {r.get('seed')}: no {metric} of it and its base on {EXTENSION_TASK}")
            elif math.log(ref) - math.log(got[0]) < c.extension_margin:
                bits.append(f"{side} seed {r.get('seed')}: {metric} {got[0]:.4g} vs the unextended base's {ref:.4g}")
    if not checked or not bits:
        return ""
    return (f"not learned at this scale: an extension whose perplexity at its new length is not below the unextended "
            f"base's by claims.yaml extension_margin = {c.extension_margin:g} nats: " + "; ".join(bits))  # fmt: skip


#: a SCROLLS answer that is empty, or one whose word pairs are mostly one repeated phrase, is no answer
DEGENERATE_DISTINCT = 0.5


def degenerate(text: str | None) -> bool:
    """Empty, or >= 4 words whose distinct consecutive word pairs are fewer than :data:`DEGENERATE_DISTINCT` of all
    ("and then, and then, and then": 2 of 5); natural text repeats few word pairs (> 0.9 even over pages)."""
    words = [w.lower() for w in str(text or "").replace(",", " ").replace(".", " ").split()]
    if not words:
        return True
    pairs = list(zip(words, words[1:], strict=False))
    return len(words) >= 4 and len(set(pairs)) / len(pairs) < DEGENERATE_DISTINCT


def scrolls_not_learned(ev: Evidence, name: str, store: Store) -> str:
    """Why a SCROLLS pair is "not learned at this scale" ('' when no run of either side answers at or below a trivial
    baseline): more than half of a run's answers empty or degenerate (:func:`degenerate`), or its exact match at or
    below the share of the most common target (answering that one every time)."""
    c = ev.claim
    if not isinstance(c.task, str) or not c.task.startswith("peeval_scrolls_") or store.con is None:
        return ""
    bits = []
    for side in (c.focus, name):
        for unit in ev.units[side]:
            for rid in unit:
                rows = store.con.execute(
                    "SELECT response, target, correct FROM samples WHERE run_id = ? AND task = ?", [rid, c.task]
                ).fetchall()
                if not rows:
                    continue
                bad = sum(degenerate(resp) for resp, _, _ in rows)
                targets = collections.Counter(str(t) for _, t, _ in rows)
                if bad * 2 > len(rows):
                    bits.append(f"{side} seed {store.runs[rid].get('seed')}: {bad} of {len(rows)} answers empty or "
                                "repeated text")  # fmt: skip
                elif all(ok is not None for *_, ok in rows) and sum(bool(ok) for *_, ok in rows) <= max(
                    targets.values()
                ):
                    bits.append(f"{side} seed {store.runs[rid].get('seed')}: exact match at or below the most common "
                                "target's share")  # fmt: skip
                break  # the unit's latest run with samples
    if not bits:
        return ""
    return "not learned at this scale: output at or below a trivial baseline: " + "; ".join(bits)
