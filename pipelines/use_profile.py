"""Select the pipeline's profile: copy params/<profile>.yaml to params.yaml (then `dvc repro`).

python pipelines/use_profile.py smoke|cpu|paper
"""

import sys
from pathlib import Path

from peeval._io import atomic_write_text

PROFILES = Path(__file__).resolve().parent.parent / "params"

if __name__ == "__main__":
    names = sorted(p.stem for p in PROFILES.glob("*.yaml"))
    if len(sys.argv) != 2 or sys.argv[1] not in names:
        raise SystemExit(f"usage: python pipelines/use_profile.py {'|'.join(names)}")
    text = (PROFILES / f"{sys.argv[1]}.yaml").read_text(encoding="utf-8")
    target = PROFILES.parent / "params.yaml"
    atomic_write_text(target, text)
    print(f"params.yaml <- params/{sys.argv[1]}.yaml; now run: dvc repro")
