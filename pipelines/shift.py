"""Stage `shift@<encoding>`: TAPE table 8, stability under position shifts (+3 BOS tokens, ids + 3),
per layer, on the pretrained checkpoint: results/shift/<encoding>/results.json."""

import sys

from common import PRETRAIN, RESULTS, entry, params, use_mirror

from peeval.evaluation.shift_stability import main

if __name__ == "__main__":
    key = sys.argv[1]
    p = params()
    use_mirror()  # the windows are PG-19 (mirror: local/gutenberg-eval)
    entry(p.encodings, "encodings", key)
    args = ["--checkpoint", str(PRETRAIN / key), "--out", str(RESULTS / "shift" / key), "--seed", str(p.seed)]
    sys.exit(main([*args, "--sequences", str(p.shift.sequences), "--length", str(p.shift.length)]))
