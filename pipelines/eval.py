"""Stage `eval_*`: one checkpoint x one task suite through `peeval eval`, into
results/<kind>/<name>/<suite>/results.json (+ samples).

    python pipelines/eval.py pretrain <encoding> <suite>
    python pipelines/eval.py diag <run> <seed>          (a diagnostics.runs entry)
    python pipelines/eval.py adapt <method> <suite>
"""

from __future__ import annotations

import json
import sys

from common import ADAPT, DIAG, PRETRAIN, RESULTS, params, read_json, use_mirror

from peeval.cli import main as peeval_main
from peeval.records import PASSKEY_TASK, diag_task


def argv_for(kind: str, name: str, what: str, p: dict) -> list[str]:
    if kind == "diag":
        from peeval.tasks.diagnostics.generators import splits

        seed = what  # diag <run> <seed>
        ck = DIAG / f"{name}-s{seed}"
        cfg = p["diagnostics"]["eval"]
        task = p["diagnostics"]["runs"][name]["task"]
        tasks = [diag_task(task, s) for s in splits(task) if s != "train"]
        metadata = {"profile": cfg.get("profile", "cpu"), "n": cfg.get("n", 100)}
        args = ["--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", ",".join(tasks)]
        limit = cfg.get("limit")
        out = RESULTS / "diag" / ck.name
        run = "diagnostics"
    else:
        suite = p["eval"]["suites"][what]
        metadata = dict(suite.get("metadata") or {})
        tasks = suite["tasks"]
        limit = suite.get("limit")
        if kind == "pretrain":
            ck = PRETRAIN / name
            if PASSKEY_TASK in tasks:
                metadata.setdefault("tokenizer", str(ck))  # count prompt tokens with the model's own tokenizer
            args = ["--model", "peeval", "--model_args", f"pretrained={ck}"]
        elif kind == "adapt":
            ck = ADAPT / name
            s = read_json(ck / "adapt_summary.json")
            margs = f"pretrained={s['base']},adapter={ck}"
            if s.get("gguf_file"):
                margs += f",gguf_file={s['gguf_file']}"
            if metadata.get("lengths"):
                margs += f",max_length={max(int(x) for x in metadata['lengths']) + 64}"
            args = ["--model", "peeval-llama", "--model_args", margs]
        else:
            raise SystemExit(f"eval: unknown kind {kind!r} (pretrain, diag, adapt)")
        args += ["--tasks", ",".join(tasks)]
        out = RESULTS / kind / name
        run = what
    args += ["--output_path", str(out), "--run_name", run, "--seed", str(p["seed"])]  # device: cuda if available
    if limit is not None:
        args += ["--limit", str(limit)]
    if metadata:
        args += ["--metadata", json.dumps(metadata)]
    return ["eval", *args]


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: eval.py pretrain <encoding> <suite> | diag <run> <seed> | adapt <method> <suite>")
    kind, name, what = sys.argv[1:4]
    use_mirror()
    argv = argv_for(kind, name, what, params())
    print("peeval " + " ".join(argv), flush=True)
    sys.exit(peeval_main(argv))
