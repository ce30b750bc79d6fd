"""Stage `train@<encoding>`: pretrain one encoding (same data, budget and settings for all).
A killed run resumes from its last saved step when the stage is run again (see resume.py)."""

import sys

from common import PRETRAIN, TOKENIZER, entry, params, use_compile_cache, use_mirror
from resume import RESUME, fail, resumable

from peeval.training.pretrain import run_train

if __name__ == "__main__":
    key = sys.argv[1]
    p = params()
    use_mirror()
    use_compile_cache()
    enc = entry(p.encodings, "encodings", key)
    try:
        s = resumable(lambda rd: run_train(PRETRAIN / key, enc.pe, enc.pe_options or None, profile=p.profile,
                                           seed=p.seed_of(key), tokenizer=TOKENIZER, resume_dir=rd,
                                           settings=p.train_overrides(key)),
                      RESUME / "train" / key, f"train@{key}")  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        fail(f"train@{key}", f"profile, seed, train.set, encodings.{key}", e)
    print(f"train {key}: {s.get('steps')} steps, val loss {s.get('final_val_loss')}")
