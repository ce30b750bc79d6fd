"""The store built from a fixed set of results folders stays the same, row for row.

``tests/leaderboard/data/store/`` holds results / checkpoint / published folders covering every metric-cell
format (ppl@L, bpb@L, tokens@L, windows@L, acc@L@depth, acc@AxB, read_acc/seq_acc,
attn_diff@shift@layer), encoding labels with options, adapt / external / published runs and
training curves. ``tests/leaderboard/data/store_dump.json`` is the dump of the store that the code before
``peeval.records`` built from them; regenerate it only for an intended change of the store:

    python tests/leaderboard/test_records_store.py > tests/leaderboard/data/store_dump.json
"""

import json
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = HERE / "data" / "store"
EXPECTED = HERE / "data" / "store_dump.json"


def build_dump(db: Path) -> dict[str, list[str]]:
    """Every ingest table of a store built from DATA, as sorted row reprs."""
    from leaderboard.ingest import TABLE_COLUMNS, ingest

    ingest([DATA / "results", DATA / "checkpoints"], db, root=DATA, published=DATA / "published")
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: sorted(map(repr, con.execute(f"select * from {t}").fetchall())) for t in sorted(TABLE_COLUMNS)}
    finally:
        con.close()


def test_store_is_unchanged_row_for_row(tmp_path):
    got = build_dump(tmp_path / "store.duckdb")
    want = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert sorted(got) == sorted(want)
    for table in want:
        assert got[table] == want[table], table
    assert all(want[t] for t in ("runs", "metrics", "ppl_by_length", "passkey_cells", "diagnostic_cells"))


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(build_dump(Path(d) / "store.duckdb"), indent=1, ensure_ascii=False))
