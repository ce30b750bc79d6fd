"""Stage `train@<encoding>`: pretrain one encoding (same data, budget and settings for all)."""

import sys

from common import PRETRAIN, TOKENIZER, entry, params, use_mirror

from peeval.train import run_train

if __name__ == "__main__":
    key = sys.argv[1]
    p = params()
    use_mirror()
    enc = entry(p, "encodings", key)
    overrides = {**(p["train"].get("set") or {}), **(enc.get("set") or {})}
    s = run_train(PRETRAIN / key, enc["pe"], enc.get("pe_options") or None, profile=p["profile"], seed=p["seed"],
                  tokenizer=TOKENIZER, **overrides)  # fmt: skip
    print(f"train {key}: {s.get('steps')} steps, val loss {s.get('final_val_loss')}")
