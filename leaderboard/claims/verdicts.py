"""Decide, the last step of a claim (schema -> matching -> stats, paired -> verdicts): every (focus, other)
pair of a claim against peeval's numbers, and the claims tables; :func:`evaluate_claims` is the whole line.

Each measured pair gets a test (``claims.test``: McNemar's exact test, or a t on the difference with its
degrees of freedom ``df``, or the normal where the uncertainty is over many examples; ``decision``) and a
p-value: two-sided for H0 "no difference" on a "better" claim; on an ``equal`` ("comparable") claim, the
equivalence test (TOST against ±tolerance) when |difference| <= tolerance, else the two-sided test of
|difference| > tolerance. Holm's correction over every pair with a p-value in the store gives ``p_adjusted``
(docs/statistics.md: why Holm), and the verdict is decided on it at ``ALPHA`` = 0.05:

- ``reproduced``: significant in the paper's direction (or, comparable claims, equivalent within the tolerance);
- ``contradicted``: significant the other way (or, comparable claims, significantly outside the tolerance);
- ``inconclusive``: measured, but not significant, or no uncertainty;
- ``not learned at this scale``: a diagnostic pair whose focus (in-distribution claims) or either side (OOD claims)
  did not beat the majority answer in distribution by claims.yaml's ``learned_margin``, or trained at a profile
  of the claim's ``unlearned_at`` (``learned``, issue 44): numbers, no test, not in Holm's family;
- ``no contrast at this setting``: both sides at the same floor or ceiling on every seed, or a difference of
  exactly 0 with no uncertainty: numbers, no test, not in Holm's family;
- ``not decidable here``: measured, but not in the setting the claim is about: a ``beyond_window`` claim (context
  extension, extrapolation) whose runs were evaluated no further than their ``training_length``; or a perplexity
  claim on language models pretrained on fewer than ``decision.MIN_TOKENS_PER_PARAM`` tokens per parameter ("not
  decidable at this scale"), as are shift-stability claims (TAPE table 8) on such models: an untrained model is
  shift invariant by the formula of RoPE and TAPE too; the row's setting says why, and the pair is no test in
  Holm's family;
- ``not measured``: peeval has no number for a side in this store; ``measured_in`` names the first profile
  whose parameter file measures the pair (``profiles``), or 'none'.

The tables' DDL is read from ``leaderboard/store/schema.sql`` (the one source of every table).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from leaderboard.store import CLAIM_TABLES, schema_columns, table_ddl
from peeval import records

from . import decision as D
from . import replication as R
from .controls import AT_INIT  # a decided pair that its step-0 untrained controls decide too (issue 67)
from .convergence import convergence
from .decision import p_value, verdict  # the rule's arithmetic: decision.py owns it
from .learned import extension_not_learned, lm_not_learned, no_contrast, not_learned, scrolls_not_learned
from .matching import Evidence, Store, find_runs, measured_length, read_store
from .profiles import measured_in
from .schema import DEFAULT_PATH, Claim, load_claims, option_defaults
from .stats import Estimate, estimate_pairs

#: a measured pair whose setting cannot decide its claim (in-window numbers for a beyond-the-window claim)
UNDECIDABLE = "not decidable here"
#: a diagnostic pair with a side that did not learn the task in distribution (``learned``; issue 44)
NOT_LEARNED = "not learned at this scale"
#: a pair with both sides at the same floor / ceiling on every seed, or exactly equal with no uncertainty
NO_CONTRAST = "no contrast at this setting"
VERDICTS = ("reproduced", "contradicted", "inconclusive", AT_INIT, NOT_LEARNED, NO_CONTRAST, UNDECIDABLE,
            "not measured")  # fmt: skip
#: the level of every decision, on Holm-adjusted p-values
ALPHA = D.ALPHA
#: the tables this package writes, and their columns (DDL: leaderboard/store/schema.sql, the store's one schema)
TABLES = CLAIM_TABLES
CLAIM_COLUMNS, VALUE_COLUMNS, CALIBRATION_COLUMNS, SENSITIVITY_COLUMNS = (schema_columns()[0][t] for t in TABLES[:4])


def _options(store: Store, c: Claim, side: str, run_ids: list[str]) -> str:
    """``side=pe{options}`` of a side's first run: every encoding option with its default filled in (what the run
    used, not only what it set), or the adapt method."""
    if not run_ids:
        return f"{side}: no runs"
    r = store.runs[run_ids[0]]
    if c.variants[side].method:
        return f"{side}={c.variants[side].method}"
    pe = r.get("pe")
    try:
        opts = {**option_defaults(pe), **(r.get("pe_options") or {})} if pe else dict(r.get("pe_options") or {})
    except Exception:  # noqa: BLE001 - an encoding this peeval does not declare: its recorded options
        opts = dict(r.get("pe_options") or {})
    return f"{side}={pe}" + json.dumps(opts, sort_keys=True)


def _setting_summary(store: Store, run_ids: list[str]) -> str:
    bits = []
    for rid in run_ids[:1]:
        r = store.runs[rid]
        p = {**(r.get("summary") or {}), **(r.get("efficiency") or {})}
        if p.get("params") is None and isinstance(r["params"].get("train"), int):
            p["params"] = r["params"]["train"]
        for key, label in (("params", "params"), ("steps", "steps"), ("tokens", "tokens")):
            if isinstance(p.get(key), (int, float)):
                bits.append(f"{label}={p[key]:,}")
        if r.get("training_length"):
            bits.append(f"ctx={r['training_length']}")
    return " ".join(bits)


def _unlearned_profiles(store: Store, c: Claim, run_ids: list[str]) -> str:
    """The claim's ``unlearned_at`` profiles that some compared run was trained at ('' if none)."""
    profiles = {str((store.runs.get(r, {}).get("summary") or {}).get("profile")) for r in run_ids}
    return ", ".join(sorted(profiles & set(c.unlearned_at)))


def _window(c: Claim, metric: str | None, store: Store, run_ids: list[str]) -> tuple[bool, str]:
    """Whether the pair measures what a ``beyond_window`` claim is about (a context longer than every run's
    ``training_length``: the trained or native window), and the note that says so either way."""
    length = measured_length(c, store, metric, run_ids)
    windows = [int(w) for r in run_ids if (w := store.runs[r].get("training_length"))]
    if length is None:
        return False, "no run records the context length it was measured at: the claim is about going beyond the window"
    if not windows:
        return False, f"measured at {length} tokens, but no run records its training length: no telling if beyond it"
    window = max(windows)
    if length <= window:
        return False, f"measured at {length} tokens, inside the model's {window}-token window: the claim is about " \
            "extending beyond it"  # fmt: skip
    return True, f"measured at {length} tokens, beyond the model's {window}-token window"


def _undertrained(c: Claim, store: Store, run_ids: list[str]) -> str:
    """Why a claim's language models are too small a budget to carry it ('' when they meet
    ``decision.MIN_TOKENS_PER_PARAM``, or the runs are no text pretraining: diagnostics, adapters of a packaged
    model). Perplexity claims are judged by their pretrained models' budget; an extension of a peeval-pretrained
    model by its base's budget, whatever the task (SCROLLS after extension too)."""
    ratios = {}
    shift = records.SHIFT_TASK in c.leaves  # TAPE table 8: a trained model's property, any random one has it too
    for r in run_ids:
        s = store.runs.get(r, {}).get("summary") or {}
        if (c.unit == "ppl" or shift) and s.get("task") is None and s.get("tokens") is not None and s.get("params"):
            ratios[r] = float(s["tokens"]) / float(s["params"])  # text pretraining (0 tokens: an untrained model)
        elif shift:
            ratios[r] = 0.0  # no training budget recorded: no telling that the model was trained at all
        base = (store.runs.get(r, {}).get("params") or {}).get("base_train") or {}
        if base.get("tokens") is not None and base.get("params"):  # an extension of a peeval-pretrained model: its
            # base's budget (0 tokens is an untrained base, not an unknown one: issue 55)
            ratios[r] = float(base["tokens"]) / float(base["params"])
    low = {r: x for r, x in ratios.items() if x < D.MIN_TOKENS_PER_PARAM}
    if not low:
        return ""
    lo, hi = min(low.values()), max(low.values())
    seen = f"{lo:.2g}" if math.isclose(lo, hi, rel_tol=0.05) else f"{lo:.2g}-{hi:.2g}"
    return (
        f"not decidable at this scale: the language models saw {seen} tokens per parameter, below the "
        f"criterion of {D.MIN_TOKENS_PER_PARAM} (Hoffmann et al. 2022, fixed before any comparison)"
    )


def store_profile(store: Store) -> str | None:
    """The profile whose pre-registered family judges ``store``: ``published/<profile>``'s name, or for this
    pipeline's own runs the parameter file (params/<name>.yaml) that params.yaml was made from (None: neither)."""
    if store.source.startswith("published/"):
        return store.source.split("/", 1)[1]
    from .profiles import active_profile

    return active_profile()


def evaluate_claims(
    claims: list[Claim],
    store: Store,
    alpha: float = ALPHA,
    profile: str | None = None,
    calibrate: bool = True,
    positive: bool = True,
) -> tuple[list[dict], list[dict]]:
    """Rows for the ``claims`` table (one per focus-vs-other pair) and ``claim_values``: each claim once
    along parse (``load_claims``) -> find runs -> estimate -> test over runs; then Holm's correction within each
    paper's pre-registered family for ``profile`` (claims.yaml ``families``; default :func:`store_profile`): m is
    the number of pairs declared there, and a declared pair without a test counts as p = 1. A pair outside the
    family gets numbers, no verdict. A test whose A/A false-positive rate on this store is above ``alpha`` beyond
    its interval (``calibration``) decides nothing. Where the store holds step-0 controls (``controls``), they are
    judged by the same rule (all but the positive control, ``positive``: trained vs step 0 means nothing for a
    step 0) and a pair they decide too is :data:`AT_INIT`, never evidence of training."""
    from . import calibration
    from . import controls as K

    profile = store_profile(store) if profile is None else profile
    declared = claims[0].families.get(profile, frozenset()) if claims and profile else frozenset()
    evidence = find_runs(claims, store)
    table = calibration.aa_table(evidence, store, alpha) if calibrate else []
    broken = {r["test"]: r for r in table if not r["decides"]}
    rows, values, decide = [], [], []
    for ev in evidence:
        ests = estimate_pairs(ev, store)
        diffs = R.differences(ev, ests, store)
        for name in ev.claim.others:
            row, how = _row(ev, name, ests[name], diffs[name], store)
            pid = row["claim_id"]
            row["family"] = f"{ev.claim.paper} @ {profile}" if pid in declared else None
            if how is not None and row["test"] in broken:
                b = broken[row["test"]]
                row["verdict"], how = UNDECIDABLE, None
                row["setting_diff"] += (f" | not decidable here: the test {row['test']}'s A/A false-positive rate on "
                                        f"this store is {b['rate']:.3f} (95 % interval {b['lo']:.3f}-{b['hi']:.3f}), "
                                        f"above alpha = {alpha:g}")  # fmt: skip
            if how is not None and pid not in declared:
                row["verdict"], how = UNDECIDABLE, None
                row["setting_diff"] += (f" | not decidable here: not in the pre-registered family of profile "
                                        f"{profile or 'none'} (claims.yaml families)")  # fmt: skip
            rows.append(row)
            decide.append(how)
        values += _values(ev.claim, ests)
    for paper in sorted({r["paper"] for r in rows}):
        fam = [i for i, r in enumerate(rows) if r["paper"] == paper and r["claim_id"] in declared]
        ps = [rows[i]["p_value"] if decide[i] is not None else 1.0 for i in fam]
        for i, p_adj in zip(fam, D.holm(ps), strict=True):
            rows[i]["family_m"] = len(fam)
            if decide[i] is not None:
                rows[i]["p_adjusted"] = p_adj
                rows[i]["verdict"] = verdict(*decide[i], p=p_adj, alpha=alpha)
    if (at_init := K.control_store(store)) is not None:
        K.label_architecture(rows, evaluate_claims(claims, at_init, alpha, profile, calibrate, positive=False)[0])
    if positive:
        _positive_controls(claims, rows, store, at_init, alpha)
    for r in rows:
        r.setdefault("family_m", None)
    if calibrate:  # each decided pair's calibrated error rate and sensitivities (issue 67): shown, never deciding
        from .sensitivity import sensitivity_rows

        by_id = {r["claim_id"]: r for r in rows}
        for s in sensitivity_rows(evidence, store, rows, alpha):
            by_id[s["claim_id"]]["sensitivity"] = s
    return rows, values, table


def _positive_controls(claims: list[Claim], rows: list[dict], store: Store, at_init=None, alpha=ALPHA) -> None:
    """An equivalence verdict (an equal claim 'reproduced' within its tolerance) stands only when a positive
    control, the same measurement in the same store, separates a pair that must differ; else "no contrast at this
    setting": an instrument that separates nothing also finds everything equivalent. With step-0 controls in the
    store that pair is the focus trained vs its step 0 (``controls.positive_control``, issue 67 item 5); without,
    the claim's ``positive_control`` pair of claims.yaml, decided different."""
    from . import controls as K

    by_id = {r["claim_id"]: r for r in rows}
    for c in claims:
        if c.claim != "equal":
            continue
        for name in c.others:
            r = by_id.get(c.pair_id(name))
            if r is None or r["verdict"] != "reproduced":
                continue
            if at_init is not None:
                passed, note = K.positive_control(c, store, at_init, alpha)
                r["setting_diff"] += f" | positive control ({note}): {'passed' if passed else 'failed'}"
                if not passed:
                    r["verdict"] = NO_CONTRAST
                continue
            ctrl = by_id.get(c.positive_control or "")
            if ctrl is not None and ctrl["verdict"] in ("reproduced", "contradicted"):
                r["setting_diff"] += f" | positive control {c.positive_control}: {ctrl['verdict']}"
                continue
            why = (
                "none declared" if c.positive_control is None else f"{c.positive_control} is {ctrl and ctrl['verdict']}"
            )
            r["verdict"] = NO_CONTRAST
            r["setting_diff"] += (f" | no contrast at this setting: equivalence counts only when the same measurement "
                                  f"separates a pair that must differ (positive control: {why})")  # fmt: skip


def _row(
    ev: Evidence, name: str, ests: tuple[Estimate | None, Estimate | None], d: R.Difference, store: Store
) -> tuple[dict, tuple | None]:
    """The ``claims`` row of focus vs ``name`` before the correction (verdict 'inconclusive', 'not decidable here' or
    'not measured'), and the arguments of :func:`verdict` when the pair is in the corrected family (a p-value, a
    verdict allowed)."""
    c, (fe, oe) = ev.claim, ests
    paper_diff, sign, kind = c.against(name)
    p = p_value(d.diff, d.se, d.df, kind, c.tolerance, d.p)
    notes = list(d.notes)
    v, where, how = "inconclusive", None, None
    converged = convergence(ev, name, store) if fe and oe else ("", "")
    if converged[1]:
        notes.append(converged[1])  # too few validations to judge: said, never a block
    window = _window(c, ev.metrics[name], store, fe.run_ids + oe.run_ids) if fe and oe and c.beyond_window else None
    if window:
        notes.append(window[1])
    if fe is None or oe is None:
        v, where = "not measured", measured_in(c, (c.focus, name))
    elif unlearned := _unlearned_profiles(store, c, fe.run_ids + oe.run_ids):
        v = NOT_LEARNED  # numbers, no verdict, not in Holm's family
        notes.append(f"not learned at this scale: the sweep's baseline does not learn this task at the {unlearned} "
                     "budget")  # fmt: skip
    elif why := (
        not_learned(ev, name, store)
        or lm_not_learned(ev, name, store)
        or converged[0]
        or extension_not_learned(ev, name, store)
        or scrolls_not_learned(ev, name, store)
    ):
        v = NOT_LEARNED  # numbers, no verdict, no test: a side that learned nothing carries no contrast
        notes.append(why)
    elif window and not window[0]:
        v = UNDECIDABLE  # numbers, no verdict, not in Holm's family: they measure something else than the claim
    elif scale := _undertrained(c, store, fe.run_ids + oe.run_ids):
        v = UNDECIDABLE  # language models below the training criterion: the same, at this scale
        notes.append(scale)
    elif why := no_contrast(ev, name, store, d.diff, d.se):
        v = NO_CONTRAST  # the same floor / ceiling on every seed: no test, not in Holm's family
        notes.append(why)
    elif d.undecidable:
        v = UNDECIDABLE  # fewer than decision.MIN_RUNS runs per side: numbers, no test
    elif p is not None:
        how = (d.diff, d.se, c.higher_is_better, sign, kind, c.tolerance, d.df)
    elif d.diff is not None:
        notes.append("no p-value: no uncertainty for the difference")
    if kind == "equal" and p is not None:
        side = "equivalence, TOST" if abs(d.diff) <= (c.tolerance or 0.0) else "outside the tolerance, two-sided"
        notes.append(f"comparable within ±{c.tolerance:g}: {side}")
    seeds = min(fe.seeds, oe.seeds) if fe and oe else (fe or oe).seeds if (fe or oe) else 0
    n = (fe.n or 0) + (oe.n or 0) if fe and oe and fe.n is not None and oe.n is not None else None
    peeval_side = _setting_summary(store, (fe.run_ids if fe else []) or [r for u in ev.units[c.focus] for r in u])
    options = [_options(store, c, side, (e.run_ids if e else []) or [r for u in ev.units[side] for r in u])
               for side, e in ((c.focus, fe), (name, oe))]  # fmt: skip
    setting = f"paper: {c.setting} | peeval: {peeval_side or 'no runs'}; {seeds} seed(s); {'; '.join(options)}"
    setting += f" | CPU profile: {c.cpu} ({c.cpu_note})"
    if notes:
        setting += " | " + "; ".join(notes)
    used = sorted(set((fe.run_ids if fe else []) + (oe.run_ids if oe else [])))
    metric = ev.metrics[name] or c.metric
    row = (c.pair_id(name), c.paper, c.ref, c.task_label(), metric, f"{c.focus} vs {name}",
           paper_diff, d.diff, d.se, n, seeds, v, d.test, d.df, p, None, where, setting, json.dumps(used), None,
           None)  # fmt: skip
    return dict(zip(CLAIM_COLUMNS, row, strict=True)), how


def _values(c: Claim, ests: dict[str, tuple[Estimate | None, Estimate | None]]) -> list[dict]:
    """The ``claim_values`` rows of a claim: every variant's number (the focus's from its first comparison)."""
    mine = {c.focus: next(iter(ests.values()))[0]} | {name: oe for name, (_, oe) in ests.items()}
    out = []
    for name, var in c.variants.items():
        e = mine.get(name)
        row = (c.id, name, var.label(), var.paper, var.paper_std, e.value if e else None, e.stderr if e else None,
               e.n if e else None, e.seeds if e else 0, json.dumps(e.run_ids if e else []))  # fmt: skip
        out.append(dict(zip(VALUE_COLUMNS, row, strict=True)))
    return out


def write_claims(con, rows: list[dict], values: list[dict], calibration: list[dict] = ()) -> None:
    """Replace the ``claims``, ``claim_values``, ``claims_calibration`` and ``claims_sensitivity`` (from the rows'
    ``sensitivity``) tables in one transaction; ``claims_registration`` is laid down empty (the claims stage fills
    it: ``registration.write_rows``)."""
    con.execute("BEGIN TRANSACTION")
    try:
        for table in TABLES:  # dropped, not emptied: an older file's tables take schema.sql's columns
            con.execute(f"DROP TABLE IF EXISTS {table}")
            con.execute(table_ddl(table))
        sens = [r["sensitivity"] for r in rows if r.get("sensitivity")]
        for table, cols, data in (("claims", CLAIM_COLUMNS, rows), ("claim_values", VALUE_COLUMNS, values),
                                  ("claims_calibration", CALIBRATION_COLUMNS, calibration),
                                  ("claims_sensitivity", SENSITIVITY_COLUMNS, sens)):  # fmt: skip
            if data:
                con.executemany(
                    f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [[r.get(k) for k in cols] for r in data],
                )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def compute_claims(
    con, claims_path: str | Path = DEFAULT_PATH, alpha: float = ALPHA, out=None, profile: str | None = None
) -> list[dict]:
    """Validate the claims file, read the store ``con``, write the claims tables into ``out`` (default: ``con``;
    the claims stage passes its own leaderboard/claims.duckdb, since the store is the ingest stage's output);
    returns the claim rows. Nothing is written on an error. ``profile``: whose pre-registered family decides
    (default :func:`store_profile`)."""
    claims = load_claims(claims_path)
    rows, values, table = evaluate_claims(claims, read_store(con), alpha, profile)
    write_claims(con if out is None else out, rows, values, table)
    return rows


def summary(rows: list[dict]) -> str:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    return ", ".join(f"{k}: {n}" for k, n in counts.items())
