"""Ingest peeval outputs into the DuckDB store (schema and column docs: ``leaderboard/store/schema.sql``).

Inputs, found under the paths given (recursively), each read by its own parser (``inputs.InputType``):

- ``peeval eval`` results directories: ``results.json`` (+ ``samples_<task>.jsonl``): ``results``;
- plain ``lm_eval --log_samples`` results files, ``results_<date>.json``: ``external``;
- training checkpoints (``train_summary.json`` + ``train_curve.csv``) and adapters (``adapt_summary.json``):
  ``checkpoints``;
- published profile folders (a ``SOURCE.json``): ``published``.

A run's kind comes from its own record (its checkpoint's summaries, the kind ``peeval eval`` recorded), never
from its model's name. Idempotent: a run's id is the sha256 of its results.json, a checkpoint's key its path, and
every ingest first deletes the rows it is about to write (plus older runs read from the same results path), so
the same input twice gives the same rows. Transactional (``writer``): every file is parsed and checked before
the database is opened; a malformed or partial file raises :class:`IngestError` naming it and the database is
left as it was. The inserts then run in one transaction, which is refused when a run's aggregates disagree with
the rows they summarise (a perplexity cell and its blocks, an accuracy and its samples:
``leaderboard.store.aggregate_mismatches``; issue 56).

Sources kept apart (issue 42): every run carries its source, ``local`` (``peeval eval`` here), ``external`` (plain
lm_eval) or ``published/<profile>`` (a folder with a SOURCE.json, whether found under ``published`` or named as a
path, checked against its SOURCE.json first); a name never holds runs of two sources, and within a source one
checkpoint is one seed (a copied folder or a second evaluation on the same tasks is refused). A results folder
whose checkpoint's weights no longer have the sha256 recorded at evaluation time is refused.

    python -m leaderboard.ingest --db leaderboard/peeval.duckdb results/ checkpoints/

The package owns the store's writer. Row 7 of leaderboard's column (docs/design.md): may import
``leaderboard.store``, ``leaderboard._cli`` and peeval's library (rows 0-5); never claims, site or publish.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from leaderboard._cli import run_command
from leaderboard.store import (
    DEFAULT_DB,
    TABLE_COLUMNS,
    VIEWS,
    StoreError,
    connect,
    insert_rows,
    open_store,
)
from peeval._io.outputs import overlap
from peeval.records import LOCAL_SOURCE, published_source

from . import writer
from .checkpoints import parse_checkpoint_dir
from .external import LM_EVAL_RESULTS, lm_eval_provenance, results_file
from .identity import check_duplicates, checkpoint_sha256, run_identity
from .inputs import InputType, discover, input_type, published_home
from .published import check_published, published_files, published_rows, read_source
from .results import parse_results_dir
from .samples import _sample_row, _sample_rows
from .values import TEXT_LIMIT, IngestError, check_metric, clip

__all__ = [
    "LM_EVAL_RESULTS", "TABLE_COLUMNS", "TEXT_LIMIT", "VIEWS", "IngestError", "InputType", "StoreError",
    "_sample_row", "_sample_rows", "check_metric", "check_published", "checkpoint_sha256", "clip", "connect",
    "discover", "ingest", "input_type", "insert_rows", "lm_eval_provenance", "main", "open_store",
    "parse_checkpoint_dir", "parse_results_dir", "published_files", "read_source", "results_file", "run_identity",
]  # fmt: skip


def _inputs(paths: list[str | Path], published: str | Path | None) -> tuple[list[Path], list[Path], list[Path]]:
    """(results, checkpoint folders, published folders) to read. A published folder is read whole, checked
    against its SOURCE.json, as its profile's runs: also when it is named as a path (`make site`) or lies under
    one, so its runs never become local ones (a user's run beside them is another row, never one more seed)."""
    given = [Path(p).resolve() for p in paths]
    result_dirs, ck_dirs = discover(given)  # found from the cwd, stored from root
    named = {h for d in (*given, *result_dirs, *ck_dirs) if (h := published_home(d)) is not None}
    result_dirs = [d for d in result_dirs if published_home(d) is None]
    ck_dirs = [d for d in ck_dirs if published_home(d) is None]
    shelf = []
    if published and Path(published).is_dir():
        # a hidden folder is a publish's unfinished temporary (a kill -9 leaves one), never a profile (issue 66)
        shelf = sorted(p.resolve() for p in Path(published).iterdir() if p.is_dir() and not p.name.startswith("."))
    folders = sorted(set(shelf) | named)
    if not result_dirs and not ck_dirs and not folders:
        raise IngestError(f"nothing to ingest under {[str(p) for p in paths]} (no results.json / *_summary.json)")
    return result_dirs, ck_dirs, folders


def ingest(
    paths: list[str | Path],
    db: str | Path = DEFAULT_DB,
    root: str | Path | None = None,
    published: str | Path | None = None,
) -> dict[str, int]:
    """Ingest every results / checkpoint directory under ``paths`` into ``db``, and every folder of
    ``published`` (see ``leaderboard.store.PUBLISHED``) beside them; rows written per table."""
    root = Path(root or Path.cwd())
    writer.check_is_store(db)
    result_dirs, ck_dirs, folders = _inputs(paths, published)
    if (hit := overlap(Path(db), [*result_dirs, *ck_dirs, *folders])) is not None:  # never into its own input
        raise IngestError(f"--db {db}: is or lies inside the input {hit}; write the store elsewhere")
    rows: dict[str, list[dict]] = {t: [] for t in TABLE_COLUMNS}
    for d in result_dirs:  # parse everything first: a bad file stops us before the database is touched
        got = parse_results_dir(d, root)
        for r in got["runs"]:
            r.setdefault("source", LOCAL_SOURCE)
        for t, rs in got.items():
            rows[t].extend(rs)
    for d in ck_dirs:
        for t, rs in parse_checkpoint_dir(d, root).items():
            rows[t].extend(rs)
    for folder in folders:
        for t, rs in published_rows(folder, root).items():
            rows[t].extend(rs)
    check_duplicates(rows["runs"])
    whole = {published_source(src["profile"]): src["machine"] for src in map(read_source, folders)}
    return writer.write(db, rows, whole)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m leaderboard.ingest", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "paths",
        nargs="+",
        help="results / checkpoint directories (searched recursively); a published "
        "folder (leaderboard/published/<profile>) records the machine its SOURCE.json names",
    )
    p.add_argument("--db", default=str(DEFAULT_DB), help="DuckDB file (default: %(default)s)")
    p.add_argument("--root", default=None, help="paths are stored relative to this directory (default: cwd)")
    args = p.parse_args(argv)

    def action() -> str:
        counts = ingest(args.paths, args.db, args.root)
        total = counts.pop(writer.STORE_RUNS)
        wrote = ", ".join(f"{t} {n}" for t, n in counts.items() if n)
        return f"{args.db}: wrote {wrote}; the store now holds {total} runs"

    return run_command("ingest", action, IngestError)
