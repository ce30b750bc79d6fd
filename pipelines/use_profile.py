"""Select the pipeline's profile: copy params/<profile>.yaml to params.yaml (then `dvc repro`).

python pipelines/use_profile.py smoke|cpu|paper
"""

import os
import sys
from pathlib import Path

PROFILES = Path(__file__).resolve().parent.parent / "params"

if __name__ == "__main__":
    names = sorted(p.stem for p in PROFILES.glob("*.yaml"))
    if len(sys.argv) != 2 or sys.argv[1] not in names:
        raise SystemExit(f"usage: python pipelines/use_profile.py {'|'.join(names)}")
    text = (PROFILES / f"{sys.argv[1]}.yaml").read_text(encoding="utf-8")
    target = PROFILES.parent / "params.yaml"
    tmp = target.with_name("params.yaml.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    print(f"params.yaml <- params/{sys.argv[1]}.yaml; now run: dvc repro")
