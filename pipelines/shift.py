"""Stage `shift@<encoding>`: TAPE table 8, stability under position shifts (+3 BOS tokens, ids + 3),
per layer, on the pretrained checkpoint: results/shift/<encoding>/results.json; `shift_step0@<encoding>`
(``shift.py <encoding> step0``): the same on its step-0 control, results/shift/<encoding>-step0."""

import sys

from common import PRETRAIN, RESULTS, entry, params, use_mirror

from peeval.evaluation.shift_stability import main

if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["step0"]):
        print("usage: shift.py <encoding> [step0]", file=sys.stderr)
        sys.exit(2)
    key, step0 = sys.argv[1], sys.argv[2:] == ["step0"]
    p = params()
    use_mirror()  # the windows are PG-19 (mirror: local/gutenberg-eval)
    entry(p.encodings, "encodings", key)
    ck, out = PRETRAIN / key, RESULTS / "shift" / key
    if step0:  # the run's step-0 untrained control (issue 67), measured the same way
        ck, out = ck / "step0", out.with_name(f"{key}-step0")
    args = ["--checkpoint", str(ck), "--out", str(out), "--seed", str(p.seed)]
    sys.exit(main([*args, "--sequences", str(p.shift.sequences), "--length", str(p.shift.length)]))
