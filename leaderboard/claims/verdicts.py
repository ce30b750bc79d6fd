"""Verdicts: every (focus, other) pair of a claim against peeval's numbers, and the claims tables.

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
import re
from pathlib import Path

from . import paired as P
from .matching import Store, ablation_keys, estimate, matching_runs, read_store, resolve_metric
from .schema import DEFAULT_PATH, Claim, _leaf_tasks, load_claims
from .stats import Estimate, Z, to_unit

VERDICTS = ("reproduced", "contradicted", "inconclusive")
SCHEMA = Path(__file__).resolve().parent.parent / "schema.sql"
#: the tables this package writes (their DDL: leaderboard/schema.sql)
TABLES = ("claims", "claim_values")
CLAIM_COLUMNS = ("claim_id", "paper", "ref", "task", "metric", "compared", "paper_value", "peeval_value", "stderr")
CLAIM_COLUMNS += ("n", "seeds", "verdict", "test", "setting_diff", "run_ids")


def table_ddl(table: str, schema: Path = SCHEMA) -> str:
    """The ``CREATE TABLE IF NOT EXISTS <table>`` statement of ``schema.sql``."""
    text = re.sub(r"--[^\n]*", "", schema.read_text(encoding="utf-8"))
    for stmt in text.split(";"):
        if re.match(rf"\s*CREATE TABLE IF NOT EXISTS {table}\s*\(", stmt, flags=re.IGNORECASE):
            return stmt.strip()
    raise LookupError(f"{schema}: no CREATE TABLE IF NOT EXISTS {table}")


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
    """Rows for the ``claims`` table (one per focus-vs-other pair) and ``claim_values``."""
    abl = ablation_keys(claims)
    rows, values = [], []
    for c in claims:
        leaves = _leaf_tasks(c.task)
        runs = {name: matching_runs(store, v, abl, c.run_params, leaves) for name, v in c.variants.items()}
        focus = c.variants[c.focus]
        ests: dict[str, Estimate | None] = {}
        metric_used: dict[str, str | None] = {}
        for name in c.variants:
            if name == c.focus:
                continue
            metric = resolve_metric(c, store, runs[c.focus] + runs[name]) if runs[c.focus] and runs[name] else None
            metric_used[name] = metric
            fe = estimate(c, store, runs[c.focus], metric) if metric else None
            oe = estimate(c, store, runs[name], metric) if metric else None
            ests.setdefault(c.focus, fe)
            ests[name] = oe
            other = c.variants[name]
            paper_diff = None
            if focus.paper is not None and other.paper is not None:
                paper_diff = round(focus.paper - other.paper, 9)  # 94.82 - 11.16 is 83.66, not 83.66000000000001
            sign = 1
            if c.claim == "better" and paper_diff not in (None, 0.0):
                sign = 1 if (paper_diff > 0) == c.higher_is_better else -1
            kind = "equal" if c.claim == "equal" or paper_diff == 0.0 else "better"
            diff = se = p = test = None
            notes = []
            if fe is None:
                notes.append(f"no peeval number for {c.focus} ({focus.label()})")
            if oe is None:
                notes.append(f"no peeval number for {name} ({other.label()})")
            if fe is not None and oe is not None:
                diff = fe.value - oe.value
                pair, why = P.compare(store, c.task, metric, runs[c.focus], runs[name], kind)
                if pair is not None:  # the paper's unit is linear in the accuracy: scale the paired se
                    scale = abs(to_unit(c.unit, 1.0, None)[0] - to_unit(c.unit, 0.0, None)[0])
                    se, p, test = scale * pair.se, pair.p, pair.test
                    notes.append(pair.describe())
                elif fe.stderr is not None and oe.stderr is not None:
                    se = math.sqrt(fe.stderr**2 + oe.stderr**2)
                    test = fe.method if fe.method == oe.method else f"{fe.method} / {oe.method}"
                    notes.append(f"unpaired: {why}")
                else:
                    notes.append(f"no uncertainty (one seed and no stderr): run >= 2 seeds; unpaired: {why}")
            v = verdict(diff, se, c.higher_is_better, sign, kind, c.tolerance, z, p)
            unlearned = _unlearned_profiles(store, c, (fe.run_ids if fe else []) + (oe.run_ids if oe else []))
            if unlearned:
                v = "inconclusive"
                notes.append(f"no verdict: the sweep's baseline does not learn this task at the {unlearned} budget")
            seeds = min(fe.seeds, oe.seeds) if fe and oe else (fe or oe).seeds if (fe or oe) else 0
            n = (fe.n or 0) + (oe.n or 0) if fe and oe and fe.n is not None and oe.n is not None else None
            peeval_side = _setting_summary(store, (fe.run_ids if fe else []) or [r for u in runs[c.focus] for r in u])
            setting = f"paper: {c.setting} | peeval: {peeval_side or 'no runs'}; {seeds} seed(s)"
            setting += f" | CPU profile: {c.cpu} ({c.cpu_note})"
            if notes:
                setting += " | " + "; ".join(notes)
            used = sorted(set((fe.run_ids if fe else []) + (oe.run_ids if oe else [])))
            rows.append(
                dict(
                    claim_id=f"{c.id}:{c.focus}-vs-{name}",
                    paper=c.paper,
                    ref=c.ref,
                    task=c.task_label(),
                    metric=metric or c.metric,
                    compared=f"{c.focus} vs {name}",
                    paper_value=paper_diff,
                    peeval_value=diff,
                    stderr=se,
                    n=n,
                    seeds=seeds,
                    verdict=v,
                    test=test,
                    setting_diff=setting,
                    run_ids=json.dumps(used),
                )
            )
        for name, var in c.variants.items():
            e = ests.get(name)
            values.append(
                dict(
                    claim_id=c.id,
                    variant=name,
                    encoding=var.label(),
                    paper_value=var.paper,
                    paper_std=var.paper_std,
                    peeval_value=e.value if e else None,
                    stderr=e.stderr if e else None,
                    n=e.n if e else None,
                    seeds=e.seeds if e else 0,
                    run_ids=json.dumps(e.run_ids if e else []),
                )
            )
    return rows, values


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
            cols = list(values[0])
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
