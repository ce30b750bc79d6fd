"""Stage `extend@<method>-base<i>`: one of the pipeline's own pretrained rope models (params.yaml
extend.bases) extended to a longer window with one method, on the same data and steps as the others (TAPE
table 2, scaled down), with its base's seed (extension seed k extends base seed k: the training run is the
unit of replication), into checkpoints/extend/<method><tag>.

    python pipelines/extend.py <method> <base>      (an extend.methods entry, an extend.bases encoding)
"""

import sys

from common import EXTEND, PRETRAIN, params, use_mirror
from resume import RESUME, fail, resumable

from peeval.training.adapt import run_adapt

if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(f"usage: {__doc__.strip().splitlines()[-1].strip()}", file=sys.stderr)
        sys.exit(2)
    method, base_key = sys.argv[1:3]
    p = params()
    runs = {run: name for name, run in p.extend.runs().items()}
    if (method, base_key) not in runs:
        print(f"extend: no extension of {base_key!r} by {method!r} in params.yaml extend (methods "
              f"{', '.join(p.extend.methods)}; bases {', '.join(b.encoding for b in p.extend.bases)})",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    name = runs[method, base_key]
    use_mirror()
    base = str(PRETRAIN / base_key)
    try:
        s = resumable(lambda rd: run_adapt(EXTEND / name, method, base=base, profile=p.profile,
                                           seed=p.seed_of(base_key), resume_dir=rd, **p.extend.train.set),
                      RESUME / "extend" / name, f"extend@{name}")  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        fail(f"extend@{name}", "profile, seed, extend", e)
    print(
        f"extend {name}: {base} to {s.get('seq_len')} tokens by {method}, seed {s.get('seed')}, "
        f"{s.get('trainable_params')} trainable parameters, {s.get('steps')} steps"
    )
