"""leaderboard.store owns the store's format: readers import it without the writer, and its run kinds are the
kinds the pipeline's runs carry."""

import json
import subprocess
import sys
from pathlib import Path

from leaderboard.store import RunKind

SMOKE = Path(__file__).parents[1] / "pipeline" / "data" / "smoke_store.json"


def test_readers_import_the_store_not_the_writer():
    code = "import sys, leaderboard.site, leaderboard.claims.verdicts; print('leaderboard.ingest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_run_kinds_cover_the_smoke_runs_and_nothing_else():
    runs = json.loads(SMOKE.read_text())["runs"]
    kinds = {r["kind"] for r in runs}
    assert kinds <= {k.value for k in RunKind}
    assert {"pretrain", "diagnostic", "adapt"} <= kinds  # the smoke profile makes all three of ours
    assert RunKind("external") is RunKind.EXTERNAL and str(RunKind.ADAPT) == "adapt"
