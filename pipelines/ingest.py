"""Stage `ingest`: a fresh leaderboard/peeval.duckdb from every results and checkpoint folder."""

from pathlib import Path

from common import ADAPT, DB, DIAG, PRETRAIN, RESULTS

from leaderboard.ingest import ingest

if __name__ == "__main__":
    DB.unlink(missing_ok=True)  # DVC removes outputs before a stage runs; by hand, start clean too
    counts = ingest([p for p in (RESULTS, PRETRAIN, DIAG, ADAPT) if Path(p).is_dir()], DB)
    print(f"ingest: {DB}: " + ", ".join(f"{t} {n}" for t, n in counts.items() if n))
