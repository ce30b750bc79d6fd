"""Select the pipeline's parameter file: write params/<name>.yaml, composed, to params.yaml (then
`dvc repro`). A file without ``extends`` is copied as it is (comments included); one that says
``extends: <other>`` is written as <other> with it merged on top (``pipeline_params.render``).
params.yaml is generated, never edited: the committed one is ``use_profile.py cpu``'s output, and a
test checks that it still is. The profile a file names (``profile:``) is a training-size preset of
peeval/training/profiles.py; params.yaml is checked by pipelines/pipeline_params.py when each stage
starts, and before it is written here.

python pipelines/use_profile.py smoke|cpu|cpu-claims|gpu|paper
"""

import sys
from pathlib import Path

from pipeline_params import ParamsError, load, render

from peeval._io import atomic_write_text

PROFILES = Path(__file__).resolve().parent.parent / "params"

if __name__ == "__main__":
    names = sorted(p.stem for p in PROFILES.glob("*.yaml"))
    if len(sys.argv) != 2 or sys.argv[1] not in names:
        raise SystemExit(f"usage: python pipelines/use_profile.py {'|'.join(names)}")
    source = PROFILES / f"{sys.argv[1]}.yaml"
    try:  # a broken parameter file never becomes the active one
        load(source)
        text = render(source)
    except ParamsError as e:
        print(f"use_profile: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    target = PROFILES.parent / "params.yaml"
    atomic_write_text(target, text)
    print(f"params.yaml <- params/{sys.argv[1]}.yaml; now run: dvc repro")
