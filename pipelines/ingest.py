"""Stage `ingest`: a fresh leaderboard/peeval.duckdb from every results and checkpoint folder, and
the published results of other machines (leaderboard/published/<profile>/, marked with their source).

The new store is built in a temporary file beside the old one and moved over it only when every
input parsed and validated; on a bad input the old store is left as it was (exit 2, one line)."""

import os
import sys
from pathlib import Path

from common import ADAPT, DB, DIAG, PRETRAIN, RESULTS

from leaderboard.ingest import IngestError, ingest
from leaderboard.store import PUBLISHED
from peeval._io import remove_database, replace_database


def main() -> int:
    tmp = DB.with_name(f".{DB.name}.{os.getpid()}.tmp")
    remove_database(tmp)
    try:
        counts = ingest([p for p in (RESULTS, PRETRAIN, DIAG, ADAPT) if Path(p).is_dir()], tmp, published=PUBLISHED)
    except IngestError as e:
        remove_database(tmp)
        print(f"ingest: error: {e}", file=sys.stderr)
        return 2
    except BaseException:
        remove_database(tmp)
        raise
    replace_database(tmp, DB)  # readers see the old store or the new one
    print(f"ingest: {DB}: " + ", ".join(f"{t} {n}" for t, n in counts.items() if n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
