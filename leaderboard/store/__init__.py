"""The peeval store: one owner for its format (schema.sql), how it is opened, its tables and the run kinds.

Readers (the site, the claims, publish) import this module, never the writer (``leaderboard.ingest``): they need
the schema and a checked read-only connection, not the parsers.

The package owns the store's format: this module and ``schema.sql``. Row 6 of leaderboard's column
(docs/design.md): peeval's library only (records, tasks); never ingest, claims, site or publish.
"""

from __future__ import annotations

import enum
import functools
import re
from pathlib import Path

from peeval.records import DATA_SOURCES, LOCAL_SOURCE
from peeval.tasks.family import families


class RunKind(enum.StrEnum):
    """``runs.kind``: what made a run's model. A run's own record names it (its checkpoint's summary, its
    provenance); ingest never guesses it from the model's name."""

    PRETRAIN = "pretrain"  # a language model `peeval train` pretrained
    DIAGNOSTIC = "diagnostic"  # a model `peeval train --task` trained on one diagnostic task
    ADAPT = "adapt"  # a pretrained model extended (`peeval adapt`), or the adapters' base as shipped
    EXTERNAL = "external"  # any other model (plain lm_eval, a hub model): a row, never a seed of ours


#: ``runs.source`` of a results file plain ``lm_eval`` wrote (no peeval provenance): a run from outside, never a
#: seed of this pipeline's runs ('local') nor of a published profile's ('published/<profile>')
EXTERNAL_SOURCE = "external"
SCHEMA = Path(__file__).with_name("schema.sql")
DEFAULT_DB = Path(__file__).parent.parent / "peeval.duckdb"


def schema_sql(schema: Path = SCHEMA) -> str:
    """schema.sql with peeval.records' names and the task families' (``peeval.tasks.family``: ``sql_names``)
    filled in (its ``{NAME}``s), then the view of the families' cells by length: the statements ingest runs."""
    names = {"LOCAL_SOURCE": LOCAL_SOURCE, "DATA_SOURCES": "' | '".join(DATA_SOURCES)}
    for fam in families():
        names.update(fam.sql_names)
    text = re.sub(r"\{([A-Z_]+)\}", lambda m: names[m[1]], schema.read_text(encoding="utf-8"))
    return text + family_length_cells()


def family_length_cells() -> str:
    """The view ``family_length_cells`` (family, run_id, task, length, value, n): the rows of every family whose
    site page is the generic by-length page (``peeval.tasks.family.SitePage`` without a module), each from the
    store view or SELECT it names (``SitePage.view``: columns run_id, task, length, value, n); no rows without one."""
    parts = [f"SELECT '{f.name}' AS family, run_id, task, length, value, n FROM {f.page.view} AS v"
             for f in families() if f.page is not None and f.page.module is None]  # fmt: skip
    none = ("SELECT NULL::VARCHAR AS family, NULL::VARCHAR AS run_id, NULL::VARCHAR AS task, NULL::INTEGER AS length,"
            " NULL::DOUBLE AS value, NULL::BIGINT AS n WHERE false")  # fmt: skip
    body = "\nUNION ALL ".join(parts) or none
    return (
        f"\n-- the task families' cells by context length (leaderboard/site/by_length.py)\n"
        f"CREATE VIEW IF NOT EXISTS family_length_cells AS\n{body};\n"
    )


def table_ddl(table: str, schema: Path = SCHEMA) -> str:
    """The ``CREATE TABLE IF NOT EXISTS <table>`` statement of ``schema.sql``."""
    text = re.sub(r"--[^\n]*", "", schema_sql(schema))
    for stmt in text.split(";"):
        if re.match(rf"\s*CREATE TABLE IF NOT EXISTS {table}\s*\(", stmt, flags=re.IGNORECASE):
            return stmt.strip()
    raise LookupError(f"{schema}: no CREATE TABLE IF NOT EXISTS {table}")


@functools.cache
def schema_columns() -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """({table or view: its columns}, the views), both in schema.sql's order, as DuckDB reads schema.sql."""
    import duckdb

    sql = schema_sql()
    names = re.findall(r"^CREATE (?:TABLE|VIEW) IF NOT EXISTS (\w+)", sql, flags=re.MULTILINE)
    con = duckdb.connect(":memory:")
    try:
        con.execute(sql)
        q = "SELECT table_name, column_name FROM information_schema.columns ORDER BY table_name, ordinal_position"
        cols: dict[str, list[str]] = {}
        for table, column in con.execute(q).fetchall():
            cols.setdefault(table, []).append(column)
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    finally:
        con.close()
    return {t: tuple(cols[t]) for t in names}, tuple(t for t in names if t in views)


#: the tables the claims stage writes (its own file, leaderboard/claims.duckdb; in the store they stay empty)
CLAIM_TABLES = ("claims", "claim_values", "claims_calibration", "claims_sensitivity", "claims_registration")
#: the store's tables and views that ingest lays down and readers check (schema.sql's; the claims tables aside)
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {t: c for t, c in schema_columns()[0].items() if t not in CLAIM_TABLES}
#: views over ``metrics``: never written, always the rows ``metrics`` holds
VIEWS = schema_columns()[1]
#: the tables a run's rows go into, and a checkpoint's
RUN_TABLES = ("metrics", "samples", "ppl_blocks", "task_data", "runs")
CHECKPOINT_TABLES = ("training_curves", "efficiency")
#: the tables ingest writes
WRITTEN = tuple(t for t in TABLE_COLUMNS if t not in VIEWS)


# ----------------------------------------------------------------------------- database


def connect(db: str | Path, read_only: bool = False):
    """A DuckDB connection with the schema applied (created if missing)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=read_only)
    if not read_only:
        con.execute(schema_sql())
    return con


class StoreError(ValueError):
    """A file a reader was pointed at is not a peeval store it can read (the message names it)."""


def open_store(db: str | Path, what: str = "--db", allow_empty: bool = False):
    """A read-only connection to the peeval store ``db``, after checking that it is one: a missing,
    truncated, locked or foreign DuckDB file, or a store of another schema (tables or columns this
    code reads are missing), is one ``StoreError`` naming the file, never a traceback or an empty
    reading (claims on a foreign file gave 90 'inconclusive' verdicts, exit 0)."""
    import duckdb

    if not Path(db).is_file():
        raise StoreError(f"{what} {db}: no such file (run the ingest stage first: python -m leaderboard.ingest)")
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise StoreError(f"{what} {db}: cannot open as a DuckDB database ({first})") from None
    have: dict[str, set[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'"
    ).fetchall():
        have.setdefault(table, set()).add(column)
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
    missing = [t for t in TABLE_COLUMNS if t not in have]
    if allow_empty and not have:  # a new, empty DuckDB file: the ingest may lay the schema in it
        return con
    if len(missing) == len(TABLE_COLUMNS):
        con.close()
        raise StoreError(f"{what} {db}: not a peeval store (none of its tables: {', '.join(TABLE_COLUMNS)})")
    lacking = {t: sorted(set(cols) - have[t]) for t, cols in TABLE_COLUMNS.items() if t in have}
    lacking = {t: c for t, c in lacking.items() if c}
    copies = [t for t in VIEWS if t in tables]  # an older store: copies of metrics' rows, not views over them
    if missing or lacking or copies:
        con.close()
        what_is = "; ".join([f"tables {', '.join(missing)} missing"] * bool(missing)
                            + [f"{t} lacks {', '.join(c)}" for t, c in lacking.items()]
                            + [f"{', '.join(copies)} tables, not views over metrics"] * bool(copies))  # fmt: skip
        raise StoreError(
            f"{what} {db}: a peeval store of another schema ({what_is}): ingest the results again into a new store"
        )
    return con


#: the table of the claims stage's database that names the store its verdicts were computed from
CLAIMS_STORE_TABLE = "claims_store"


def store_fingerprint(con) -> str:
    """What a store holds, in one sha256: its runs' ids (each the sha256 of its results), sorted, and every value
    of every other table the claims or the site read (curves, summaries, efficiency, samples, ...): per table its
    row count and the sum of DuckDB's hash of each whole row, so a changed curve re-ingested under the same run id
    is another store. The claims stage records it beside its verdicts; the site shows them only beside the store
    they were computed from. The claims' own tables are left out (they are what is fingerprinted for)."""
    import hashlib

    ids = [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
    h = hashlib.sha256("\n".join(ids).encode())
    tables = sorted(t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                                              "AND database_name = current_database()").fetchall()
                    if not t.startswith("claim"))  # fmt: skip
    for t in tables:
        n, total = con.execute(f'SELECT count(*), sum(hash(x)::HUGEINT) FROM "{t}" x').fetchone()
        h.update(f"\n{t}:{n}:{total}".encode())
    return h.hexdigest()


def check_claims_store(con, claims_con, claims_db: str | Path) -> None:
    """StoreError unless the claims database ``claims_con`` was computed from the store ``con``: its recorded
    fingerprint (:func:`store_fingerprint`) is the store's; a file written before the fingerprint existed must
    at least name no run the store lacks (an older store's verdicts showed runs that did not exist)."""
    tables = {r[0] for r in claims_con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'")
              .fetchall()}  # fmt: skip
    why = None
    if CLAIMS_STORE_TABLE in tables:
        row = claims_con.execute(f"SELECT fingerprint FROM {CLAIMS_STORE_TABLE}").fetchone()
        if row is None or row[0] != store_fingerprint(con):
            why = "computed from another store (its runs or their values differ)"
    elif "claims" in tables:
        import json

        named = set()
        for (ids,) in claims_con.execute("SELECT run_ids FROM claims WHERE run_ids IS NOT NULL").fetchall():
            try:
                named |= {str(i) for i in json.loads(ids) or []}
            except (TypeError, ValueError):
                continue
        have = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
        if missing := sorted(named - have):
            why = f"its verdicts rest on {len(missing)} run(s) this store does not hold (e.g. {missing[0]})"
    if why:
        raise StoreError(f"--claims-db {claims_db}: {why}; run the claims stage on this store again "
                         "(python pipelines/claims.py --db <store>)")  # fmt: skip


#: relative tolerance of an aggregate against its rows: the same float64 sums in another order (a few ulps per term)
AGGREGATE_RTOL = 1e-9


def _differs(stored, want) -> bool:
    import math

    if stored is None or want is None:
        return stored is not want
    if math.isnan(stored) or math.isnan(want):
        return not (math.isnan(stored) and math.isnan(want))
    return stored != want and not math.isclose(stored, want, rel_tol=AGGREGATE_RTOL)


def aggregate_mismatches(
    con, run_ids: list[str] | None = None, checkpoints: list[str] | None = None, unsampled: bool | list[str] = False
) -> list[str]:
    """Every aggregate the store holds that disagrees with the per-row data it summarises, one line each (empty:
    consistent); ``run_ids`` / ``checkpoints``: only those (None: all; ingest and the site check the runs' own, a
    test the published stores' checkpoints too). Recomputed here:

    - a perplexity cell from its (document, length) blocks: ``tokens@L`` = sum tokens, ``ppl@L`` =
      exp(-sum ll / sum tokens), ``bpb@L`` = -sum ll / (ln 2 * sum bytes) (peeval/tasks/ppl/ppl.py);
    - a task's outcome share (acc, else exact_match, else em: the key its samples' ``correct`` came from) from its
      samples, one per document: the mean of ``correct`` (x 100 for a percent) and its ``n``;
    - a checkpoint's ``final_val_ppl`` = exp(``final_val_loss``), its ``steps`` and ``tokens`` the last of its
      training curve.

    Seed means and seed counts are never stored: the site's views and board compute them from these rows."""
    import math

    from peeval.records import OUTCOME_KEYS, outcome_scale

    runs = "" if run_ids is None else "AND list_contains($ids, b.run_id)"
    args = {} if run_ids is None else {"ids": list(run_ids)}
    out = []
    q = f"""WITH b AS (SELECT run_id, task, length, sum(ll) ll, sum(tokens) tokens, sum(bytes) bytes FROM ppl_blocks b
                       WHERE ll IS NOT NULL {runs} GROUP BY ALL)
            SELECT r.results_path, b.task, m.metric, m.value, b.ll, b.tokens, b.bytes FROM b
            JOIN metrics m ON m.run_id = b.run_id AND m.task = b.task AND m.filter = 'none'
             AND m.metric IN ('ppl@' || b.length, 'bpb@' || b.length, 'tokens@' || b.length)
            LEFT JOIN runs r ON r.run_id = b.run_id ORDER BY ALL"""
    for path, task, metric, value, ll, tokens, nbytes in con.execute(q, args).fetchall():
        base = metric.split("@")[0]
        if base == "tokens":
            want = float(tokens)
        elif base == "ppl":
            try:
                want = math.exp(-ll / tokens) if tokens else None
            except OverflowError:  # an exploding model: ppl.py reports inf
                want = math.inf
        else:
            want = -ll / (nbytes * math.log(2)) if nbytes else None
        if want is not None and _differs(value, want):
            out.append(f"{path}: {task} {metric} is {value!r}, its documents' blocks give {want!r}")
    q = f"""WITH s AS (SELECT run_id, task, count(*) n, count(DISTINCT doc_id) docs, avg(correct::DOUBLE) frac
                       FROM samples b WHERE correct IS NOT NULL {runs} GROUP BY ALL),
            o AS (SELECT run_id, task, metric, value, n FROM metrics WHERE filter = 'none'
                  AND list_contains($keys, metric))
            SELECT r.results_path, s.task, list(o.metric ORDER BY list_position($keys, o.metric)),
                   list(o.value ORDER BY list_position($keys, o.metric)),
                   list(o.n ORDER BY list_position($keys, o.metric)), s.n, s.frac
            FROM s JOIN o USING (run_id, task) LEFT JOIN runs r ON r.run_id = s.run_id
            WHERE s.n = s.docs GROUP BY ALL ORDER BY ALL"""
    for path, task, metrics, values, ns, n, frac in con.execute(q, {**args, "keys": list(OUTCOME_KEYS)}).fetchall():
        metric, value, stored_n = metrics[0], values[0], ns[0]
        want = frac * outcome_scale(task, metric)
        if _differs(value, want):
            out.append(f"{path}: {task} {metric} is {value!r}, its {n} samples give {want!r}")
        elif stored_n is not None and stored_n != n:
            out.append(f"{path}: {task} {metric} counts n={stored_n}, its samples {n}")
    out += _item_mismatches(con, runs.replace("b.run_id", "run_id"), args, unsampled)
    if checkpoints is not None and not checkpoints:
        return out
    cks = "" if checkpoints is None else "WHERE list_contains($cks, e.checkpoint)"
    q = f"""SELECT e.checkpoint, e.final_val_loss, e.final_val_ppl, e.steps, e.tokens, max(c.step), max(c.tokens),
                   count(c.step)
            FROM efficiency e LEFT JOIN training_curves c USING (checkpoint) {cks} GROUP BY ALL ORDER BY ALL"""
    for ck, loss, ppl, steps, tokens, last_step, last_tokens, points in con.execute(
        q, {} if checkpoints is None else {"cks": list(checkpoints)}
    ).fetchall():
        if loss is not None and ppl is not None:
            want = math.inf if loss >= 700 else math.exp(loss)  # peeval/training/loop.py
            if _differs(ppl, want):
                out.append(f"{ck}: final_val_ppl is {ppl!r}, exp(final_val_loss {loss!r}) is {want!r}")
        if points and (steps, tokens) != (last_step, last_tokens):
            out.append(f"{ck}: {steps} steps / {tokens} tokens, its training curve ends at step {last_step} / "
                       f"{last_tokens} tokens")  # fmt: skip
    return out


#: a task whose published runs predate its samples (shift stability logged no sequences before issue 66): its
#: numbers cannot be recomputed, and a run of it without samples is the one exception to "no samples, no number"
UNSAMPLED_TASKS = ("peeval_shift_stability",)


def _item_mismatches(con, runs: str, args: dict, unsampled: bool | list[str]) -> list[str]:
    """Every metrics row recomputed from the rows it came from (issue 66): a task's metric from its samples' per-sample
    items (``peeval.records.aggregate.recompute``, the task's own aggregation), a group's from its members' rows
    (size-weighted, as lm-eval). A metric that no sample holds, of a task with no samples, or with no rule, is a
    mismatch too: nothing the board shows is left unaccounted for. ``unsampled`` (True, or those run ids): a task
    of a run with no samples items at all is not checked: the site's check of a store (ingest has refused such runs
    before), and ingest's of results a peeval wrote before it recorded its samples files."""
    import json
    from collections import defaultdict

    from peeval.records import OUTCOME_KEYS
    from peeval.records.aggregate import NotRecomputable, decode_item, group_value, recompute

    items, itemised, sampled, judged = defaultdict(list), set(), set(), set()
    q = f"SELECT run_id, task, items, correct IS NOT NULL FROM samples WHERE true {runs}"
    for run_id, task, doc, has_correct in con.execute(q, args).fetchall():
        sampled.add((run_id, task))
        if has_correct:  # its outcome share is checked from samples.correct (above)
            judged.update((run_id, task, k) for k in OUTCOME_KEYS)
        if doc is None:  # a sample listing no metrics (lm-eval before it wrote `metrics`): no items
            continue
        itemised.add((run_id, task))
        for key, v in json.loads(doc).items():
            items[(run_id, task, key)].append(decode_item(v))
    q = f"SELECT DISTINCT run_id, task, length FROM ppl_blocks WHERE ll IS NOT NULL {runs}"
    for run_id, task, length in con.execute(q, args).fetchall():  # its cells are checked from the blocks (above)
        judged.update((run_id, task, f"{base}@{length}") for base in ("ppl", "bpb", "tokens"))
    rows = con.execute(
        f"""SELECT m.run_id, r.results_path, m.task, m.metric, m.filter, m.value, m.n, r.params
            FROM metrics m LEFT JOIN runs r USING (run_id) WHERE true {runs.replace("run_id", "m.run_id")}
            ORDER BY ALL""",
        args,
    ).fetchall()
    value = {(run_id, task, metric, filt): (v, n) for run_id, _, task, metric, filt, v, n, _ in rows}
    out = []
    for run_id, path, task, metric, filt, stored, _, params in rows:
        where = f"{path}: {task} {metric}" + (f",{filt}" if filt != "none" else "")
        groups = (json.loads(params) if params else {}).get("groups") or {}
        if (run_id, task, f"{metric},{filt}") in items:
            try:
                want = recompute(task, metric, items[(run_id, task, f"{metric},{filt}")])
            except NotRecomputable as e:
                out.append(f"{path}: {e}")
                continue
            if _differs(stored, want):
                out.append(f"{where} is {stored!r}, its samples give {want!r}")
        elif task in groups:
            members = [value.get((run_id, m, metric, filt)) for m in groups[task]]
            if any(x is None or x[1] is None for x in members):
                out.append(f"{where}: a member of the group has no {metric} row with its documents counted")
            elif _differs(stored, want := group_value(members)):
                out.append(f"{where} is {stored!r}, its members give {want!r}")
        elif filt == "none" and (run_id, task, metric) in judged:
            continue
        elif (run_id, task) in itemised:
            out.append(f"{where}: no sample holds it (its samples list other metrics)")
        elif (run_id, task) in sampled:
            out.append(f"{where}: its samples list no metrics (lm-eval's `metrics`): nothing recomputes it")
        elif task not in UNSAMPLED_TASKS and not (unsampled is True or (unsampled and run_id in unsampled)):
            out.append(f"{where}: the run has no samples of {task} (lm-eval's --log_samples): nothing accounts for it")
    return out


def check_aggregates(
    con,
    what: str,
    run_ids: list[str] | None = None,
    checkpoints: list[str] | None = (),
    unsampled: bool | list[str] = False,
) -> None:
    """StoreError, one line naming the first mismatch and how many more, unless :func:`aggregate_mismatches` finds
    none: a number the board shows never disagrees with the rows it summarises."""
    if bad := aggregate_mismatches(con, run_ids, checkpoints, unsampled):
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise StoreError(f"{what}: an aggregate disagrees with the rows it summarises: {bad[0]}{more}")


def insert_rows(con, table: str, rows: list[dict]) -> None:
    if not rows:
        return
    import pyarrow as pa

    cols = TABLE_COLUMNS[table]
    data = pa.table({c: pa.array([r.get(c) for r in rows]) for c in cols})
    con.register("_peeval_rows", data)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM _peeval_rows")
    finally:
        con.unregister("_peeval_rows")


# ----------------------------------------------------------------------------- published results
#: results of a profile run elsewhere (e.g. the gpu profile on a GPU machine), committed to the
#: repository by ``python -m leaderboard.publish``: leaderboard/published/<profile>/ holds SOURCE.json,
#: results/**/results.json + samples and checkpoints/**/{train,adapt}_summary.json + train_curve.csv
#: (no weights), laid out as in the repository that produced them.
PUBLISHED = Path(__file__).parent.parent / "published"
SOURCE_FILE = "SOURCE.json"
