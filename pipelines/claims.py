"""Stage `claims` (after `ingest`): verdicts for leaderboard/claims/claims.yaml from the DuckDB store.

    python pipelines/claims.py [--db leaderboard/peeval.duckdb] [--out leaderboard/claims.duckdb]
                               [--claims leaderboard/claims/claims.yaml]
                               [--summary leaderboard/claims_summary.json]

Reads the store (read-only: it is the ingest stage's output) and writes the ``claims`` and
``claim_values`` tables (DDL: leaderboard/store/schema.sql) into their own DuckDB file, ``--out``
(default: claims.duckdb beside ``--db``), which the site stage reads beside the store; plus a
small JSON summary (verdict counts) usable as a DVC metrics file. The new file is built beside
the old one and moved over it only when the claims file validated and every verdict was computed:
on an error nothing is written (exit 2, one line). The logic is in leaderboard.claims.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _is_claims_db(path: Path, duckdb) -> bool:
    """A database this stage wrote: its verdict tables (an older version's lack the newer ones) and the
    ``claims_store`` table it writes beside them (its manifest), nothing else; any other DuckDB file (a store, a
    user's) is not one, whatever its name."""
    from leaderboard.claims.verdicts import TABLES
    from leaderboard.store import CLAIMS_STORE_TABLE

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    except duckdb.Error:
        return False
    finally:
        con.close()
    return {"claims", CLAIMS_STORE_TABLE} <= names <= {*TABLES, CLAIMS_STORE_TABLE}  # an older one lacks a table


def recorded_registration(source: str, profile: str, first_run) -> dict | None:
    """The registration recorded for the data judged (issue 67 item 4): a published profile's SOURCE.json
    ``registration`` (leaderboard/published/<profile>; None when it records none); local runs: the committed
    registration, dated by git, against the earliest local run (None when it has uncommitted changes or no git)."""
    from leaderboard.claims import registration as R
    from leaderboard.store import PUBLISHED, SOURCE_FILE

    if source.startswith("published/"):
        try:
            src = json.loads((PUBLISHED / source.split("/", 1)[1] / SOURCE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return src.get("registration") if isinstance(src, dict) else None
    try:
        return R.record(profile, first_run.isoformat() if first_run is not None else None, R.ROOT)
    except R.RegistrationError:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pipelines/claims.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=str(ROOT / "leaderboard" / "peeval.duckdb"), help="the store (read only)")
    ap.add_argument("--out", default=None, help="the claims database (default: claims.duckdb beside --db)")
    ap.add_argument("--claims", default=str(ROOT / "leaderboard" / "claims" / "claims.yaml"))
    ap.add_argument("--summary", default=None, help="write verdict counts as JSON here")
    ap.add_argument(
        "--source",
        default="local",
        help="judge the runs of this source (runs.source): local, or published/<profile> "
        "on a published profile's board (make site) (default: %(default)s)",
    )
    args = ap.parse_args(argv)

    import duckdb

    from leaderboard.claims import (
        VERDICTS,
        ClaimsError,
        evaluate_claims,
        load_claims,
        read_store,
        summary,
        write_claims,
    )
    from peeval._io import atomic_write_text, remove_database, replace_database
    from peeval._io.outputs import OutputRefused, check_output_file

    out = Path(args.out) if args.out else Path(args.db).with_name("claims.duckdb")
    if out.resolve() == Path(args.db).resolve():
        print(f"pipelines/claims.py: --out {out}: must not be the store --db (ingest's output)", file=sys.stderr)
        return 2
    try:  # a store, the claims file or the verdicts are never overwritten by another output
        check_output_file(out, "--out", "duckdb", inputs=(args.db, args.claims))
        if args.summary:
            check_output_file(args.summary, "--summary", "claims-summary", inputs=(args.db, args.claims, out))
    except OutputRefused as e:
        print(f"pipelines/claims.py: {e}", file=sys.stderr)
        return 2
    from leaderboard.store import CLAIMS_STORE_TABLE, StoreError, open_store, store_fingerprint

    if out.exists() and not _is_claims_db(out, duckdb):  # another DuckDB file (a store, a user's): never replaced
        print(f"pipelines/claims.py: --out {out}: exists and is a DuckDB database this stage did not write (no "
              f"{CLAIMS_STORE_TABLE} table beside its verdicts); it is never replaced (remove it or choose another "
              "path)", file=sys.stderr)  # fmt: skip
        return 2

    if not Path(args.db).is_file():
        print(f"pipelines/claims.py: --db {args.db}: no such database (run the ingest stage first)", file=sys.stderr)
        return 2
    try:  # a foreign or old-schema file is refused, not read as a store with no runs
        con = open_store(args.db)
    except StoreError as e:
        print(f"pipelines/claims.py: {e}", file=sys.stderr)
        return 2
    sources = [r[0] for r in con.execute("SELECT DISTINCT source FROM runs ORDER BY source").fetchall()]
    if args.source not in sources and (sources or args.source != "local"):  # a typo, or `local` on a published store
        con.close()
        hint = f" (pass --source {sources[0]})" if len(sources) == 1 else ""
        print(f"pipelines/claims.py: --source {args.source!r}: the store holds no run of it; it holds "
              f"{', '.join(sources) or 'no runs'}{hint}", file=sys.stderr)  # fmt: skip
        return 2
    fingerprint = store_fingerprint(con)  # the claims belong to this store (the site checks it)
    from leaderboard.claims.registration import RegistrationError, board_rows, write_rows

    try:
        rows, values, calibration = evaluate_claims(load_claims(args.claims), read_store(con, args.source))
        first = con.execute("SELECT min(date) FROM runs WHERE source = ?", [args.source]).fetchone()[0]
        profiles = {str(r["family"]).rsplit(" @ ", 1)[1] for r in rows if r.get("family")}
        registration = board_rows(profiles, lambda p: recorded_registration(args.source, p, first),
                                  claims=Path(args.claims))  # fmt: skip
    except (ClaimsError, RegistrationError) as e:
        print(f"pipelines/claims.py: {e}", file=sys.stderr)
        return 2
    finally:
        con.close()
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # a read-only file system: the one line below
        remove_database(tmp)
        tcon = duckdb.connect(str(tmp))
        try:
            write_claims(tcon, rows, values, calibration)
            write_rows(tcon, registration)
            tcon.execute(f"CREATE TABLE {CLAIMS_STORE_TABLE} AS SELECT ? AS fingerprint, ? AS source",
                         [fingerprint, args.source])  # fmt: skip
        finally:
            tcon.close()
        replace_database(tmp, out)  # readers see the old verdicts or the new ones
    except (duckdb.Error, OSError) as e:  # a full disk: the old verdicts stay, no temporary is left
        why = " ".join(str(e).split())
        print(f"pipelines/claims.py: --out {out}: writing the verdicts failed, the old file is kept ({why})",
              file=sys.stderr)  # fmt: skip
        return 2
    except KeyboardInterrupt:
        print("pipelines/claims.py: interrupted; the old verdicts are kept", file=sys.stderr)
        return 130
    finally:
        remove_database(tmp)
    print(f"claims: {len(rows)} comparisons ({summary(rows)}) -> {out}")
    if args.summary:
        counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
        try:  # a full disk here: the verdicts are written, the old summary stays whole (atomic)
            atomic_write_text(Path(args.summary), json.dumps({"comparisons": len(rows), **counts}, indent=1) + "\n")
        except OSError as e:
            print(f"pipelines/claims.py: --summary {args.summary}: {e.strerror or e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
