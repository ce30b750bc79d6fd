"""Stage `adapt@<method>`: extend SmolLM2-135M's context with one method (TAPE table 2)."""

import sys

from common import ADAPT, params, use_mirror
from resume import RESUME, fail, resumable

from peeval.training.adapt import run_adapt

if __name__ == "__main__":
    method = sys.argv[1]
    p = params()
    use_mirror()
    try:
        s = resumable(lambda rd: run_adapt(ADAPT / method, method, profile=p.profile, seed=p.seed,
                                           resume_dir=rd, **p.adapt.train.set),
                      RESUME / "adapt" / method, f"adapt@{method}")  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        fail(f"adapt@{method}", "profile, seed, adapt.train", e)
    print(f"adapt {method}: {s.get('trainable_params')} trainable parameters, {s.get('steps')} steps")
