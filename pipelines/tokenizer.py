"""Stage `tokenizer`: the profile's tokenizer, shared by every pretraining run."""

from common import TOKENIZER, params, use_mirror
from resume import fail

from peeval.training.data import build_tokenizer

if __name__ == "__main__":
    p = params()
    use_mirror()
    try:
        build_tokenizer(TOKENIZER, profile=p.profile, overwrite=True, **p.tokenizer.set)  # the stage owns its output
    except (ValueError, FileNotFoundError) as e:
        fail("tokenizer", "profile, tokenizer.set", e)
    print(f"tokenizer: {TOKENIZER}")
