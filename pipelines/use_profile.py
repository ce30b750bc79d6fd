"""Select the pipeline's profile: copy its parameter file params/<profile>.yaml to params.yaml (then
`dvc repro`). A profile is a training-size preset of peeval/training/profiles.py; params.yaml is
checked by pipelines/pipeline_params.py when each stage starts.

python pipelines/use_profile.py smoke|cpu|gpu|paper
"""

import sys
from pathlib import Path

from pipeline_params import ParamsError, load

from peeval._io import atomic_write_text

PROFILES = Path(__file__).resolve().parent.parent / "params"

if __name__ == "__main__":
    names = sorted(p.stem for p in PROFILES.glob("*.yaml"))
    if len(sys.argv) != 2 or sys.argv[1] not in names:
        raise SystemExit(f"usage: python pipelines/use_profile.py {'|'.join(names)}")
    try:  # a broken parameter file never becomes the active one
        load(PROFILES / f"{sys.argv[1]}.yaml")
    except ParamsError as e:
        print(f"use_profile: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    text = (PROFILES / f"{sys.argv[1]}.yaml").read_text(encoding="utf-8")
    target = PROFILES.parent / "params.yaml"
    atomic_write_text(target, text)
    print(f"params.yaml <- params/{sys.argv[1]}.yaml; now run: dvc repro")
