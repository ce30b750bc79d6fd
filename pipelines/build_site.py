"""Stage `site`: the static leaderboard, plus the files `dvc metrics show` (headline numbers per
encoding) and `dvc plots show` (perplexity vs context length) read."""

from __future__ import annotations

import json
import math
from pathlib import Path

from common import DB, SITE

from leaderboard.site import build_site, leaderboard_stats
from peeval._io import atomic_write_text

METRICS = Path("leaderboard/metrics.json")
PLOTS = Path("leaderboard/plots")


def headline(con) -> dict:
    """{encoding: {column: mean over seeds}} for the leaderboard's columns: the leaderboard's own means
    (finite ones only: JSON has no infinity)."""
    labels, stats, _ = leaderboard_stats(con, ("pretrain", "diagnostic", "adapt", "external"))
    out = {}
    for name in sorted(stats):
        row = {}
        for label in labels:
            est = stats[name].get(label)
            if est is not None and math.isfinite(est.value):
                row[label.replace(" ", "_")] = round(est.value, 6)
        out[name] = row
    return out


def ppl_rows(con) -> list[dict]:
    cur = con.execute("select r.name as encoding_, p.corpus, p.length, avg(p.ppl) ppl, avg(p.bpb) bpb "
                      "from ppl_by_length p join runs r using (run_id) where isfinite(p.ppl) "
                      "group by all order by corpus, encoding_, length")  # fmt: skip
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


if __name__ == "__main__":
    import duckdb

    index = build_site(DB, SITE)
    con = duckdb.connect(str(DB), read_only=True)
    try:
        atomic_write_text(METRICS, json.dumps(headline(con), indent=1, sort_keys=True))
        rows = ppl_rows(con)
    finally:
        con.close()
    fields = ["encoding_", "corpus", "length", "ppl", "bpb"]
    lines = ["encoding,corpus,length,ppl,bpb"] + [",".join(str(r[f]) for f in fields) for r in rows]
    atomic_write_text(PLOTS / "ppl_vs_length.csv", "\n".join(lines) + "\n")
    print(f"site: {index.resolve()}")
