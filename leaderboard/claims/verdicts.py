"""Decide, the last step of a claim (schema -> matching -> stats, paired -> verdicts): every (focus, other)
pair of a claim against peeval's numbers, and the claims tables; :func:`evaluate_claims` is the whole line.

- ``reproduced``: peeval's difference has the paper's direction and exceeds ``Z`` (=2) combined
  standard errors;
- ``contradicted``: the opposite direction, beyond the same uncertainty;
- ``inconclusive``: otherwise, or when a number or its uncertainty is missing.

An ``equal`` claim ("comparable") is reproduced when |difference| + Z·se <= tolerance and
contradicted when |difference| − Z·se > tolerance. Where both encodings answered the same examples
the difference and its se (or McNemar's p) are paired (``paired``); otherwise the two estimates'
standard errors combine as independent. ``claims.test`` names the test of each verdict. The
tables' DDL is read from ``leaderboard/schema.sql`` (the one source of every table).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from leaderboard.ingest import CLAIM_TABLES, schema_columns, table_ddl

from . import paired as P
from .matching import Evidence, Store, find_runs, read_store
from .schema import DEFAULT_PATH, Claim, load_claims
from .stats import Estimate, Z, estimate_pairs

VERDICTS = ("reproduced", "contradicted", "inconclusive")
#: the tables this package writes, and their columns (DDL: leaderboard/schema.sql, the store's one schema)
TABLES = CLAIM_TABLES
CLAIM_COLUMNS, VALUE_COLUMNS = (schema_columns()[0][t] for t in TABLES)


def verdict(
    diff: float | None,
    se: float | None,
    higher_is_better: bool,
    expected_sign: int = 1,
    kind: str = "better",
    tolerance: float | None = None,
    z: float = Z,
    p: float | None = None,
) -> str:
    """``diff`` = focus − other in the paper's unit; ``expected_sign`` = +1 if the paper says the
    focus is better, −1 if its own numbers show the other ahead. ``p``: a paired test's two-sided
    p-value; a "better" claim is then decided by p < P(|N(0,1)| > z) (``paired.ALPHA`` for z = Z:
    the level of z standard errors) in the direction of ``diff``, instead of by ``se``."""
    if kind != "equal" and p is not None and diff is not None and math.isfinite(diff):
        adv = (diff if higher_is_better else -diff) * (1 if expected_sign >= 0 else -1)
        if p >= math.erfc(z / math.sqrt(2.0)) or adv == 0:
            return "inconclusive"
        return "reproduced" if adv > 0 else "contradicted"
    if diff is None or se is None or not math.isfinite(diff) or not math.isfinite(se):
        return "inconclusive"
    adv = diff if higher_is_better else -diff
    if kind == "equal":
        tol = tolerance or 0.0
        if abs(adv) + z * se <= tol:
            return "reproduced"
        if abs(adv) - z * se > tol:
            return "contradicted"
        return "inconclusive"
    s = 1 if expected_sign >= 0 else -1
    if s * adv > z * se:
        return "reproduced"
    if s * adv < -z * se:
        return "contradicted"
    return "inconclusive"


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
        if r["pe_options"]:
            bits.append("options=" + json.dumps(r["pe_options"], sort_keys=True))
    return " ".join(bits)


def _unlearned_profiles(store: Store, c: Claim, run_ids: list[str]) -> str:
    """The claim's ``unlearned_at`` profiles that some compared run was trained at ('' if none)."""
    profiles = {str((store.runs.get(r, {}).get("summary") or {}).get("profile")) for r in run_ids}
    return ", ".join(sorted(profiles & set(c.unlearned_at)))


def evaluate_claims(claims: list[Claim], store: Store, z: float = Z) -> tuple[list[dict], list[dict]]:
    """Rows for the ``claims`` table (one per focus-vs-other pair) and ``claim_values``: each claim once
    along parse (``load_claims``) -> find runs -> estimate -> decide."""
    rows, values = [], []
    for ev in find_runs(claims, store):
        ests = estimate_pairs(ev, store)
        diffs = P.differences(ev, ests, store)
        rows += [_decide(ev, name, ests[name], diffs[name], store, z) for name in ev.claim.others]
        values += _values(ev.claim, ests)
    return rows, values


def _decide(
    ev: Evidence, name: str, ests: tuple[Estimate | None, Estimate | None], d: P.Difference, store: Store, z: float
) -> dict:
    """The ``claims`` row of focus vs ``name``: the verdict and what it rests on."""
    c, (fe, oe) = ev.claim, ests
    paper_diff, sign, kind = c.against(name)
    v = verdict(d.diff, d.se, c.higher_is_better, sign, kind, c.tolerance, z, d.p)
    notes = list(d.notes)
    if unlearned := _unlearned_profiles(store, c, (fe.run_ids if fe else []) + (oe.run_ids if oe else [])):
        v = "inconclusive"
        notes.append(f"no verdict: the sweep's baseline does not learn this task at the {unlearned} budget")
    seeds = min(fe.seeds, oe.seeds) if fe and oe else (fe or oe).seeds if (fe or oe) else 0
    n = (fe.n or 0) + (oe.n or 0) if fe and oe and fe.n is not None and oe.n is not None else None
    peeval_side = _setting_summary(store, (fe.run_ids if fe else []) or [r for u in ev.units[c.focus] for r in u])
    setting = f"paper: {c.setting} | peeval: {peeval_side or 'no runs'}; {seeds} seed(s)"
    setting += f" | CPU profile: {c.cpu} ({c.cpu_note})"
    if notes:
        setting += " | " + "; ".join(notes)
    used = sorted(set((fe.run_ids if fe else []) + (oe.run_ids if oe else [])))
    metric = ev.metrics[name] or c.metric
    row = (f"{c.id}:{c.focus}-vs-{name}", c.paper, c.ref, c.task_label(), metric, f"{c.focus} vs {name}",
           paper_diff, d.diff, d.se, n, seeds, v, d.test, setting, json.dumps(used))  # fmt: skip
    return dict(zip(CLAIM_COLUMNS, row, strict=True))


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


def write_claims(con, rows: list[dict], values: list[dict]) -> None:
    """Replace the ``claims`` and ``claim_values`` tables in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        for table in TABLES:
            con.execute(table_ddl(table))
        con.execute("DELETE FROM claims")
        con.execute("DELETE FROM claim_values")
        if rows:
            cols = CLAIM_COLUMNS
            con.executemany(
                f"INSERT INTO claims ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [[r[k] for k in cols] for r in rows],
            )
        if values:
            cols = VALUE_COLUMNS
            con.executemany(
                f"INSERT INTO claim_values ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [[r[k] for k in cols] for r in values],
            )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def compute_claims(con, claims_path: str | Path = DEFAULT_PATH, z: float = Z, out=None) -> list[dict]:
    """Validate the claims file, read the store ``con``, write ``claims`` and ``claim_values`` into
    ``out`` (default: ``con``; the claims stage passes its own leaderboard/claims.duckdb, since the
    store is the ingest stage's output); returns the claim rows. Nothing is written on an error."""
    claims = load_claims(claims_path)
    rows, values = evaluate_claims(claims, read_store(con), z)
    write_claims(con if out is None else out, rows, values)
    return rows


def summary(rows: list[dict]) -> str:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    return ", ".join(f"{k}: {n}" for k, n in counts.items())
