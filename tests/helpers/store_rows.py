"""The rows of a pipeline's stores (``leaderboard/peeval.duckdb`` + ``leaderboard/claims.duckdb``)
as comparable data: what two runs of the same pipeline on the same inputs must agree on, row for row.

What legitimately differs between two runs is taken out, and only that: the run id (a hash of
results.json, which holds the date) becomes the run's stable key (kind, checkpoint, results path);
dates, commits, wall-clock times and throughputs are dropped; long texts become their sha256.
The environment (package versions: torch, transformers, lm-eval, ...) stays in the store's provenance
but is no part of the comparison: a reference compares results, not environments (a new transformers
release must not fail the test when it moves no number; when it does move one, the rows say so).
Floats are kept as they are and compared with a tolerance by :func:`diff`.

Two comparisons use these rows (issue 40):
- **across machines** (:func:`portable`, :data:`CROSS_CPU_RTOL`): another CPU, or another of torch's CPU kernel
  paths (``ATEN_CPU_CAPABILITY=default|avx2|avx512``), or another thread count, sums floats in another order,
  so trained weights differ in their last bits. What any machine must reproduce is compared exactly: every row,
  key, task, count and token total, and every integer; floats to a per-table tolerance measured over those
  paths (tests/pipeline/data/cross_cpu_spread.json); what only one CPU reproduces bit for bit, the greedy
  generations of the smoke's tiny models (:data:`MACHINE_BOUND`) and checkpoint hashes, is not compared.
- **on one machine** (:func:`diff` with ``rtol=0``): everything, bit for bit (test_pipeline_determinism.py).

``python tests/helpers/store_rows.py STORE_DIR OUT.json`` writes a dump (how the reference in
``tests/pipeline/data/`` was made, see test_pipeline_smoke.py)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path

#: columns that depend on when / where a run happened, not on what it computed
VOLATILE = {"run_id", "date", "git_commit", "elapsed_s", "tokens_per_s", "train_time_s", "wall_s", "run_ids"}
#: keys inside JSON columns that do (nested anywhere)
VOLATILE_KEYS = {"train_time_s", "elapsed_s", "tokens_per_s", "date", "wall_s", "git_commit", "time_s"}
#: the environment a run happened in: provenance, not results (columns, and keys nested in JSON columns)
ENVIRONMENT = {"torch_version", "transformers_version", "lm_eval_version"}
# cpu: the CPU model and torch's kernel path (peeval.install.versions.cpu_identity)
ENVIRONMENT_KEYS = {"versions", "cpu"}
#: the stores' tables; claims tables live in claims.duckdb (before: inside the store)
STORE_TABLES = ("runs", "metrics", "ppl_by_length", "loss_by_position", "passkey_cells", "diagnostic_cells",
                "training_curves", "efficiency", "samples", "ppl_blocks", "task_data")  # fmt: skip
CLAIMS_TABLES = ("claims", "claim_values")
#: long free text: compared by hash
HASHED = {"prompt", "target", "response"}
#: what one CPU's kernels decide bit by bit and another CPU does not reproduce: per table, columns; and keys
#: nested anywhere. Greedy generations of the smoke's near-untrained models flip tokens between CPUs (measured:
#: 23-36 of 115 responses); a checkpoint's sha256 changes with the last bit of any weight.
MACHINE_BOUND = {"samples": {"response"}}
MACHINE_BOUND_KEYS = {"checkpoint_sha256"}
#: across CPUs and kernel paths: per table, the relative tolerance of floats, set from the largest spread measured
#: over ATEN_CPU_CAPABILITY=default|avx2|avx512 x 1|2 threads (tests/pipeline/data/cross_cpu_spread.json) with a
#: margin of 10x; absolute differences below CROSS_CPU_ATOL are round-off of quantities that are themselves
#: round-off (TAPE table 8's attention change under shifted ids, ~3e-9, and stderrs down to 1e-10: the largest such
#: value of the reference, 1.07e-8, with a margin of ~5x; a value grown 100x is a difference; checked against the
#: reference in test_store_rows_environment). Tables not named: CROSS_CPU_RTOL_DEFAULT.
CROSS_CPU_RTOL: dict[str, float] = {
    "metrics": 2e-4,  # measured 1.6e-5 (nll_pos of the GGUF SmolLM2 base: its dequantised matmuls)
    "loss_by_position": 2e-4,  # measured 1.6e-5 (the same values)
    "ppl_by_length": 1e-4,  # measured 9.3e-6
    "ppl_blocks": 5e-5,  # measured 4.6e-6
    "runs": 2e-5,  # measured 1.9e-6 (the adapter's final validation ppl, 4.8e8)
    "efficiency": 2e-5,  # measured 1.9e-6 (the same value)
}
CROSS_CPU_RTOL_DEFAULT = 1e-5
CROSS_CPU_ATOL = 5e-8


#: an installed package's folder (the SmolLM2 GGUF's) depends on where the venv is
_SITE = re.compile(r"\S*?site-packages/")


def _clean(v):
    if isinstance(v, str):
        return _SITE.sub("<site-packages>/", v)
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in sorted(v.items()) if k not in VOLATILE_KEYS | ENVIRONMENT_KEYS}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def _value(col: str, v):
    if v is None or isinstance(v, (bool, int, float)):
        return v
    s = str(v)
    if col in HASHED:
        return "sha256:" + hashlib.sha256(s.encode()).hexdigest()[:16]
    if s[:1] in "{[":
        try:
            return _clean(json.loads(s))
        except ValueError:
            pass
    return _clean(s)


def _rows(con, table: str, run_key: dict, published: frozenset = frozenset()) -> list[dict]:
    cur = con.execute(f"SELECT * FROM {table}")
    cols = [d[0] for d in cur.description]
    out = []
    for row in cur.fetchall():
        r = dict(zip(cols, row))
        if _published(r, published):
            continue
        if "run_id" in r:
            r["run"] = run_key.get(r["run_id"], r["run_id"])
        out.append({c: _value(c, v) for c, v in r.items() if c not in VOLATILE | ENVIRONMENT})

    def key(r):  # floats last, so that round-off cannot reorder rows
        exact = {c: v for c, v in r.items() if not isinstance(v, float)}
        return json.dumps(exact, sort_keys=True, default=str), json.dumps(r, sort_keys=True, default=str)

    return sorted(out, key=key)


def _published(row: dict, published: set[str]) -> bool:
    """A row of the committed published results (leaderboard/published/): not the pipeline's own output."""
    return row.get("run_id") in published or str(row.get("checkpoint") or "").startswith("leaderboard/published/")


def dump(leaderboard_dir: str | Path) -> dict[str, list[dict]]:
    """Every table of the store and of the claims file, rows sorted, volatile columns dropped; the rows of the
    committed published results are left out (they are the same whatever the pipeline does)."""
    import duckdb

    d = Path(leaderboard_dir)
    con = duckdb.connect(str(d / "peeval.duckdb"), read_only=True)
    run_key = {rid: f"{kind}|{ck}|{path}" for rid, kind, ck, path in
               con.execute("SELECT run_id, kind, checkpoint, results_path FROM runs").fetchall()}  # fmt: skip
    published = frozenset(r[0] for r in con.execute("SELECT run_id FROM runs WHERE source <> 'local'").fetchall())
    tables = {t: _rows(con, t, run_key, published) for t in STORE_TABLES}
    claims_db = d / "claims.duckdb"
    ccon = duckdb.connect(str(claims_db), read_only=True) if claims_db.exists() else con
    tables.update({t: _rows(ccon, t, run_key) for t in CLAIMS_TABLES})
    return tables


def _close(a, b, rtol: float, atol: float = 1e-6) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or isinstance(a, str) or isinstance(b, str):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)  # atol: round-off of round-off (attn_diff ~1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol, atol) for x, y in zip(a, b))
    return a == b


def _portable_value(v):
    if isinstance(v, dict):
        return {k: _portable_value(x) for k, x in v.items() if k not in MACHINE_BOUND_KEYS}
    if isinstance(v, list):
        return [_portable_value(x) for x in v]
    return v


def _exact_key(r: dict) -> str:
    """A row's identity without its floats (nested ones too), so that round-off cannot reorder rows."""

    def shape(v):
        if isinstance(v, dict):
            return {k: shape(x) for k, x in v.items()}
        if isinstance(v, list):
            return [shape(x) for x in v]
        return "<float>" if isinstance(v, float) else v

    return json.dumps(shape(r), sort_keys=True, default=str)


def portable(tables: dict) -> dict:
    """The rows any machine must reproduce: :data:`MACHINE_BOUND` values taken out, rows re-sorted by what is
    compared exactly (a flipped generation or a float's last bit cannot move a row)."""
    out = {}
    for t, rows in tables.items():
        drop = MACHINE_BOUND.get(t, set())
        kept = [{c: _portable_value(v) for c, v in r.items() if c not in drop} for r in rows]
        out[t] = sorted(kept, key=_exact_key)
    return out


def cross_cpu_diff(reference: dict, now: dict) -> list[str]:
    """:func:`diff` of the portable rows with the measured cross-CPU tolerances."""
    rtol = {t: CROSS_CPU_RTOL.get(t, CROSS_CPU_RTOL_DEFAULT) for t in reference}
    return diff(portable(reference), portable(now), rtol=rtol, atol=CROSS_CPU_ATOL)


def diff(
    reference: dict,
    now: dict,
    added: dict[str, dict] | None = None,
    rtol: float | dict[str, float] = 1e-5,
    atol: float = 1e-6,
) -> list[str]:
    """The differences of ``now`` from ``reference``, one line each ([] when the stores agree).
    ``added``: per table, columns that exist only now, with the value every row must hold; ``rtol``: one relative
    tolerance, or one per table; ``rtol=0, atol=0``: bit for bit."""
    problems = [f"{t}: a table the reference does not have" for t in sorted(set(now) - set(reference))]
    for table, ref_rows in reference.items():
        rows = [dict(r) for r in now.get(table, [])]
        for col, value in (added or {}).get(table, {}).items():
            for r in rows:
                if r.pop(col, value) != value:
                    problems.append(f"{table}: new column {col} is {r.get(col)!r}, expected {value!r}")
        if len(rows) != len(ref_rows):
            problems.append(f"{table}: {len(rows)} rows now, {len(ref_rows)} in the reference")
            continue
        tol = rtol.get(table, CROSS_CPU_RTOL_DEFAULT) if isinstance(rtol, dict) else rtol
        for i, (a, b) in enumerate(zip(ref_rows, rows)):
            if a.keys() != b.keys():
                problems.append(f"{table} row {i}: columns {sorted(a.keys() ^ b.keys())} differ")
            elif not _close(a, b, tol, atol):
                cols = [c for c in a if not _close(a[c], b[c], tol, atol)]
                problems.append(f"{table} row {i}: {', '.join(f'{c}: {a[c]!r} -> {b[c]!r}' for c in cols)}"[:600])
    return problems


def write(tables: dict, path: str | Path) -> None:
    """One row per line: a changed row is one line of a git diff."""
    lines = ["{"]
    for i, (t, rows) in enumerate(sorted(tables.items())):
        body = ",\n".join(json.dumps(r, sort_keys=True, default=str) for r in rows)
        lines.append(f"{json.dumps(t)}: [\n{body}\n]" + ("," if i < len(tables) - 1 else ""))
    Path(path).write_text("\n".join(lines) + "\n}\n")


def read(path: str | Path) -> dict:
    """A dump as written by :func:`write`, with any environment a reference still holds taken out."""
    tables = json.loads(Path(path).read_text())
    return {t: [{c: _clean(v) for c, v in r.items() if c not in ENVIRONMENT} for r in rows]
            for t, rows in tables.items()}  # fmt: skip


if __name__ == "__main__":
    write(dump(sys.argv[1]), sys.argv[2])
