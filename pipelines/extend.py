"""Stage `extend@<method>`: the pipeline's own pretrained rope model (params.yaml extend.base) extended to a
longer window with one method, on the same data and steps as the others (TAPE table 2, scaled down)."""

import sys

from common import EXTEND, PRETRAIN, params, use_mirror
from resume import RESUME, fail, resumable

from peeval.training.adapt import run_adapt

if __name__ == "__main__":
    method = sys.argv[1]
    p = params()
    use_mirror()
    base = str(PRETRAIN / p.extend.base)
    try:
        s = resumable(lambda rd: run_adapt(EXTEND / method, method, base=base, profile=p.profile, seed=p.seed,
                                           resume_dir=rd, **p.extend.train.set),
                      RESUME / "extend" / method, f"extend@{method}")  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        fail(f"extend@{method}", "profile, seed, extend", e)
    print(
        f"extend {method}: {base} to {s.get('seq_len')} tokens, {s.get('trainable_params')} trainable parameters, "
        f"{s.get('steps')} steps"
    )
