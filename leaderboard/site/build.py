"""Building the site: the store opened read-only with the site's views, every page of the registry rendered in
its order, the assets added, the folder written at once."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from leaderboard._cli import run_command
from leaderboard.site import pages
from leaderboard.site.context import SiteStore
from leaderboard.site.output import SiteOutError, write_tree
from leaderboard.store import StoreError, check_aggregates, check_claims_store, open_store

LEADERBOARD = Path(__file__).resolve().parents[1]
#: where the pipeline's site goes (the package leaderboard/site/ is the code that builds it)
DEFAULT_OUT = LEADERBOARD / "public"
ASSETS = Path(__file__).with_name("assets")


def render_all(store: SiteStore) -> dict[str, str]:
    """{path: text} of every file of the site: each registry page's module's ``render(store)`` in the registry's
    order, the downloads they added, the stylesheet and the script."""
    files: dict[str, str] = {}
    for entry in pages.PAGES:
        module = importlib.import_module(f"leaderboard.site.{entry.module}")
        out = module.render(store) if entry.family is None else module.render(store, entry.family)
        for page in [] if out is None else out if isinstance(out, list) else [out]:
            files[page.path] = page.html
    files.update(store.files)
    for name in ("site.css", "site.js"):
        files[f"assets/{name}"] = (ASSETS / name).read_text(encoding="utf-8")
    return files


def build_site(db: str | Path, out: str | Path = DEFAULT_OUT, claims_db: str | Path | None = None) -> Path:
    """Build the site for the store ``db`` into ``out``; returns the path of index.html. The claims
    come from ``claims_db`` (default: claims.duckdb beside ``db``, the claims stage's output) when
    that file exists, else from the store itself."""
    import duckdb

    if claims_db is not None and not Path(claims_db).is_file():
        raise FileNotFoundError(f"--claims-db {claims_db}: no such DuckDB file (run the claims stage first)")
    claims_db = Path(db).with_name("claims.duckdb") if claims_db is None else Path(claims_db)
    con = open_store(db)  # a missing, truncated, locked or foreign file: one line
    try:
        ccon = duckdb.connect(str(claims_db), read_only=True) if claims_db.is_file() else None
    except duckdb.Error as e:
        con.close()
        raise StoreError(
            f"--claims-db {claims_db}: cannot open as a DuckDB database ({str(e).splitlines()[0]})"
        ) from None
    try:
        # a number shown never disagrees with the rows it summarises (ingest refused a run without samples)
        check_aggregates(con, f"--db {db}", unsampled=True)
        if ccon is not None:  # verdicts of another store are never shown beside this one's runs
            check_claims_store(con, ccon, claims_db)
        return write_tree(Path(out), render_all(SiteStore(con, ccon)))
    finally:
        con.close()
        if ccon is not None:
            ccon.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m leaderboard.site", description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default=str(LEADERBOARD / "peeval.duckdb"))
    p.add_argument("--claims-db", default=None, help="the claims stage's database (default: beside --db)")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    args = p.parse_args(argv)
    build = lambda: str(build_site(args.db, args.out, args.claims_db).resolve())
    # OSError: a read-only or full file system under --out (the old site stays: write_tree swaps a finished one in)
    return run_command("site", build, (OSError, SiteOutError, StoreError))
