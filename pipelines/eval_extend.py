"""Stage `eval_extend`: one extended model (params.yaml `extend`, checkpoints/extend/<method>) x one suite through
`peeval eval` as `peeval-llama` (the base checkpoint + the adapter), into results/extend/<method>/<suite>/.

    python pipelines/eval_extend.py <method> <suite>

A suite with context lengths reads up to its longest; any other (SCROLLS) reads its prompts at the extended
window (the adapter's seq_len), not at the base's native one, which the model config still names.
"""

from __future__ import annotations

import json
import sys

from common import EXTEND, RESULTS, entry, params, read_json, use_mirror

from peeval.cli import main as peeval_main


def argv_for(method: str, suite_name: str, p) -> list[str]:
    suite = entry(p.eval.suites, "eval.suites", suite_name)
    ck = EXTEND / entry({m: m for m in p.extend.methods}, "extend.methods", method)
    s = read_json(ck / "adapt_summary.json")
    metadata = dict(suite.metadata)
    window = max(int(x) for x in metadata["lengths"]) + 64 if metadata.get("lengths") else int(s["seq_len"])
    margs = f"pretrained={s['base']},adapter={ck},max_length={window}"
    args = ["eval", "--model", "peeval-llama", "--model_args", margs,
            "--tasks", ",".join(suite.tasks), "--output_path", str(RESULTS / "extend" / method),
            "--run_name", suite_name, "--seed", str(p.seed)]  # fmt: skip
    if suite.limit is not None:
        args += ["--limit", str(suite.limit)]
    if metadata:
        args += ["--metadata", json.dumps(metadata)]
    return args


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python pipelines/eval_extend.py <method> <suite>", file=sys.stderr)
        sys.exit(2)
    use_mirror()
    argv = argv_for(sys.argv[1], sys.argv[2], params())
    print("peeval " + " ".join(argv), flush=True)
    sys.exit(peeval_main(argv))
