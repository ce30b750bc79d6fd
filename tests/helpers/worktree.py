"""A copy of the working tree as a fresh clone has it (tracked and untracked-but-not-ignored files), for the
tests that run the pipeline or edit the source in a throwaway repository."""

import shutil
import subprocess
from pathlib import Path

from conftest import REPO


def copy_working_tree(work: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, files):
        src = Path(REPO) / rel
        if src.is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / rel)
    return work
