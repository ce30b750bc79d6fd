"""Resume state of the training stages (train, diagnostics, adapt), kept outside their DVC outputs.

DVC deletes a stage's declared outputs before it reruns the stage, so a ``train_state.pt`` inside
``checkpoints/...`` would be gone when ``dvc repro`` is run again after a kill. The state lives in
``.resume/<stage>/`` instead (git-ignored, not a DVC output nor a dependency of any stage); the
training code deletes it once the checkpoint is complete. Declared outputs keep DVC's defaults
(deleted before a rerun, so never stale; restorable from the run-cache, which ``persist: true``
would turn off).
"""

from __future__ import annotations

import sys
from pathlib import Path

from peeval.training.state import STATE_FILE, ResumeMismatch

RESUME = Path(".resume")


def resumable(run, resume_dir: Path, stage: str):
    """``run(resume_dir)``; a state left by a run with other parameters (params.yaml changed since
    the kill) is discarded with one line and training starts anew, as DVC would rerun the stage."""
    try:
        return run(resume_dir)
    except ResumeMismatch as e:
        print(f"{stage}: discarding the resume state of other parameters ({e})", file=sys.stderr, flush=True)
        (resume_dir / STATE_FILE).unlink(missing_ok=True)
        return run(resume_dir)


def fail(stage: str, where: str, e: Exception) -> None:
    """One line naming the stage and the params.yaml entries it read, exit code 2."""
    print(f"{stage}: error in params.yaml ({where}): {e}", file=sys.stderr)
    raise SystemExit(2)
