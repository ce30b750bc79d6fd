"""Pipeline stage ``claims``: verdicts for leaderboard/claims.yaml from the DuckDB store.

    python pipelines/claims.py [--db leaderboard/peeval.duckdb] [--claims leaderboard/claims.yaml]
                               [--summary leaderboard/claims_summary.json]

Reads runs / metrics / ppl_by_length / passkey_cells / diagnostic_cells / training_curves,
replaces the ``claims`` and ``claim_values`` tables in one transaction, and writes a small
JSON summary (verdict counts) usable as a DVC metrics file. The logic is in peeval.claims.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pipelines/claims.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=str(ROOT / "leaderboard" / "peeval.duckdb"))
    ap.add_argument("--claims", default=str(ROOT / "leaderboard" / "claims.yaml"))
    ap.add_argument("--summary", default=None, help="write verdict counts as JSON here")
    args = ap.parse_args(argv)

    from leaderboard.ingest import connect
    from peeval._io import atomic_write_text
    from peeval.claims import ClaimsError, compute_claims, summary

    if not Path(args.db).is_file():
        print(f"pipelines/claims.py: --db {args.db}: no such database (run the ingest stage first)", file=sys.stderr)
        return 2
    import duckdb

    try:
        con = connect(args.db)
    except duckdb.Error as e:
        print(
            f"pipelines/claims.py: --db {args.db}: cannot open as a DuckDB database ({type(e).__name__}: {e})",
            file=sys.stderr,
        )
        return 2
    try:
        rows = compute_claims(con, args.claims)
    except ClaimsError as e:
        print(f"pipelines/claims.py: {e}", file=sys.stderr)
        return 2
    finally:
        con.close()
    print(f"claims: {len(rows)} comparisons ({summary(rows)}) -> {args.db}")
    if args.summary:
        counts = {v: sum(r["verdict"] == v for r in rows) for v in ("reproduced", "contradicted", "inconclusive")}
        out = Path(args.summary)
        atomic_write_text(out, json.dumps({"comparisons": len(rows), **counts}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
