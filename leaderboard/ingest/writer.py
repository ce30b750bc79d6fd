"""The one transaction an ingest writes: the rows it replaces deleted, the parsed rows inserted, checked once
more against the runs already in the store; on any failure (a full disk, Ctrl-C) the store as it was, and a
store this ingest created removed."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from leaderboard.store import (
    CHECKPOINT_TABLES,
    RUN_TABLES,
    VIEWS,
    WRITTEN,
    StoreError,
    check_aggregates,
    connect,
    insert_rows,
    open_store,
)
from peeval._io import remove_database
from peeval.records import LOCAL_SOURCE

from .identity import check_duplicates, data_reads, eval_protocol, run_identity, training_identity
from .values import IngestError


def check_is_store(db: str | Path) -> None:
    """IngestError unless an existing ``db`` is a peeval store of this schema (or an empty DuckDB file): never lay
    peeval's tables into someone else's database, or mix two schemas."""
    if Path(db).is_file():
        try:
            open_store(db, "--db", allow_empty=True).close()
        except StoreError as e:
            raise IngestError(str(e)) from None


def check_against_store(con, runs: list[dict], replaced: list[str]) -> None:
    """``identity.check_duplicates`` against the runs already in the store (those this ingest replaces aside)."""
    if not runs:
        return
    stored = con.execute("SELECT r.run_id, r.name, r.source, r.params, r.results_path, "
                         "(SELECT list(DISTINCT m.task ORDER BY m.task) FROM metrics m WHERE m.run_id = r.run_id), "
                         "(SELECT any_value(e.summary) FROM efficiency e WHERE e.checkpoint = r.checkpoint "
                         "AND e.method IS NULL), r.protocol, r.pe, r.pe_options FROM runs r "
                         "WHERE NOT list_contains(?, r.run_id)",
                         [replaced]).fetchall()  # fmt: skip
    reads: dict[str, list[dict]] = {}
    cur = con.execute("SELECT run_id, task, source, location, config, split, documents_sha256 FROM task_data")
    cols = [d[0] for d in cur.description]
    for row in cur.fetchall():
        reads.setdefault(row[0], []).append(dict(zip(cols, row)))
    old = []
    for run_id, name, source, params, path, tasks, train, protocol, pe, pe_options in stored:
        tasks = list(tasks or [])
        try:
            p = json.loads(params) if params else {}
            ident = run_identity(p, tasks, [pe, json.loads(pe_options) if pe_options else None])
            training = training_identity(json.loads(train) if train else None, p, tasks,
                                         data_reads(reads.get(run_id, [])))  # fmt: skip
        except (ValueError, AttributeError):
            p, ident, training = {}, None, None
        old.append({"run_id": run_id, "name": name, "source": source, "results_path": f"{path} (in the store)",
                    "_identity": ident, "_training": training,
                    "_protocol": eval_protocol(protocol, p.get("limit"), tasks)})  # fmt: skip
    check_duplicates([*old, *runs])


def _replaced(con, rows: dict[str, list[dict]], whole: dict[str, str]) -> list[str]:
    """Delete (and return) the runs this ingest replaces: its own, older runs read from the same results paths,
    and every run of a published profile it reads whole (with the copies an older `make site` wrote of them:
    source 'local' with the folder's machine)."""
    run_ids = sorted({r["run_id"] for r in rows["runs"]})
    if not run_ids and not whole:
        return []
    # an older run of the same results path *and source*: a local run whose path (under --root) equals a published
    # run's never deletes that run (it is another source's row, refused or kept beside it by check_duplicates)
    keys = sorted({f"{r.get('source') or LOCAL_SOURCE}\x00{r['results_path']}" for r in rows["runs"]})
    old = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE list_contains(?, source || chr(0) || "
                                     "results_path)", [keys]).fetchall()]  # fmt: skip
    for source, machine in whole.items():
        q = "SELECT run_id FROM runs WHERE source = ? OR (source = ? AND machine = ?)"
        old += [r[0] for r in con.execute(q, [source, LOCAL_SOURCE, machine]).fetchall()]
    stale = sorted(set(run_ids) | set(old))
    for t in RUN_TABLES:
        con.execute(f"DELETE FROM {t} WHERE list_contains(?, run_id)", [stale])
    return stale


STORE_RUNS = "runs in the store"  # counts' key of the store's total, beside the rows this ingest wrote


def _write(con, rows: dict[str, list[dict]], whole: dict[str, str]) -> dict[str, int]:
    """The transaction's statements; rows written per table (the views: the new runs' rows they show)."""
    stale = _replaced(con, rows, whole)
    check_against_store(con, rows["runs"], stale)
    if cks := sorted({r["checkpoint"] for t in CHECKPOINT_TABLES for r in rows[t]}):
        for t in CHECKPOINT_TABLES:
            con.execute(f"DELETE FROM {t} WHERE list_contains(?, checkpoint)", [cks])
    for t in WRITTEN:
        insert_rows(con, t, rows[t])
    counts = {t: len(rs) for t, rs in rows.items()}
    run_ids = sorted({r["run_id"] for r in rows["runs"]})
    try:  # a results.json whose numbers are not its samples' (edited, or beside another run's samples): refused
        legacy = [r["run_id"] for r in rows["runs"] if r.get("_unsampled_ok")]
        check_aggregates(con, "ingest", run_ids, unsampled=legacy)
    except StoreError as e:
        raise IngestError(f"{e}; nothing was written") from None
    for t in VIEWS:
        q = f"SELECT count(*) FROM {t} WHERE list_contains(?, run_id)"
        counts[t] = con.execute(q, [run_ids]).fetchone()[0] if run_ids else 0
    counts[STORE_RUNS] = con.execute("SELECT count(*) FROM runs").fetchone()[0]  # kept runs too (issue 68)
    return counts


def write(db: str | Path, rows: dict[str, list[dict]], whole: dict[str, str]) -> dict[str, int]:
    """``rows`` into ``db`` in one transaction, replacing what they replace; ``whole``: {source: machine} of the
    published profiles read whole. Rows written per table."""
    created = not Path(db).exists()  # a store this ingest creates goes again if the ingest fails
    try:
        con = connect(db)
    except Exception as e:  # duckdb.Error, OSError: not a database, a folder, no permission
        if created:
            remove_database(db)
        raise IngestError(f"{db}: cannot open as a DuckDB database ({type(e).__name__}: {e})") from e
    try:
        con.execute("BEGIN TRANSACTION")
        counts = _write(con, rows, whole)
        con.execute("COMMIT")
    except BaseException as e:  # a full disk, Ctrl-C: the old store as it was, no new empty one
        try:
            con.execute("ROLLBACK")
        except Exception:  # noqa: S110 - a COMMIT that failed (a disk full at COMMIT) already ended the transaction
            pass
        finally:
            with contextlib.suppress(Exception):  # closing a connection whose disk is full: the store is as it was
                con.close()
            wal = Path(f"{db}.wal")
            if created:
                remove_database(db)
            elif wal.is_file() and wal.stat().st_size == 0:  # the failed COMMIT's empty log: nothing to replay
                wal.unlink()
        if isinstance(e, Exception) and not isinstance(e, IngestError):
            why = " ".join(str(e).split())
            raise IngestError(f"--db {db}: writing the store failed, nothing was changed ({why})") from e
        raise
    con.close()
    return counts
