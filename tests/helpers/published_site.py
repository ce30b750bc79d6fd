"""A published board's site built as `make site SITE_PROFILE=<profile>` builds it (ingest, claims, site), for the
browser tests that read the published pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

from leaderboard.ingest import ingest
from leaderboard.site import build_site


def published_site(root: Path, profile: str) -> Path:
    """The site folder of ``leaderboard/published/<profile>``, its store and claims under ``root/<profile>``."""
    db = root / profile / "peeval.duckdb"
    db.parent.mkdir()
    ingest([Path(REPO) / "leaderboard" / "published" / profile], db)
    subprocess.run([sys.executable, "pipelines/claims.py", "--db", str(db), "--source", f"published/{profile}"],
                   cwd=REPO, check=True, capture_output=True)  # fmt: skip
    return build_site(db, root / profile / "site").parent
