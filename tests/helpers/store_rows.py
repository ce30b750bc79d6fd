"""The rows of a pipeline's stores (``leaderboard/peeval.duckdb`` + ``leaderboard/claims.duckdb``)
as comparable data: what two runs of the same pipeline on the same inputs must agree on, row for row.

What legitimately differs between two runs is taken out, and only that: the run id (a hash of
results.json, which holds the date) becomes the run's stable key (kind, checkpoint, results path);
dates, commits, wall-clock times and throughputs are dropped; long texts become their sha256.
The environment (package versions: torch, transformers, lm-eval, ...) stays in the store's provenance
but is no part of the comparison: a reference compares results, not environments (a new transformers
release must not fail the test when it moves no number; when it does move one, the rows say so).
Floats are kept as they are and compared with a tolerance by :func:`diff`.

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
ENVIRONMENT_KEYS = {"versions"}
#: the stores' tables; claims tables live in claims.duckdb (before: inside the store)
STORE_TABLES = ("runs", "metrics", "ppl_by_length", "loss_by_position", "passkey_cells", "diagnostic_cells",
                "training_curves", "efficiency", "samples", "ppl_blocks", "task_data")  # fmt: skip
CLAIMS_TABLES = ("claims", "claim_values")
#: long free text: compared by hash
HASHED = {"prompt", "target", "response"}


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


def _close(a, b, rtol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or isinstance(a, str) or isinstance(b, str):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-6)  # below 1e-6: float round-off (attn_diff ~1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    return a == b


def diff(reference: dict, now: dict, added: dict[str, dict] | None = None, rtol: float = 1e-5) -> list[str]:
    """The differences of ``now`` from ``reference``, one line each ([] when the stores agree).
    ``added``: per table, columns that exist only now, with the value every row must hold."""
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
        for i, (a, b) in enumerate(zip(ref_rows, rows)):
            if a.keys() != b.keys():
                problems.append(f"{table} row {i}: columns {sorted(a.keys() ^ b.keys())} differ")
            elif not _close(a, b, rtol):
                cols = [c for c in a if not _close(a[c], b[c], rtol)]
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
