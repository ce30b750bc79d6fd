"""The ``peeval eval`` runner: lm-eval on peeval's tasks, the run written with its provenance.

``peeval eval`` takes lm_eval's arguments for model / tasks / limit / batch size / device /
output (lm-eval's other evaluation flags pass through, read by lm-eval's own parser), but indexes
only peeval's tasks plus the lm-eval folders the named tasks live in
(plain lm_eval indexes ~14,700 YAMLs on every run), and writes
``<output_path>/<run-name>/results.json`` (+ ``samples_<task>.jsonl``) with peeval's
provenance: version, git commit, checkpoint hash, pe and options, max_length, protocol,
dtype, seed, library versions. Its arguments are parsed in :mod:`peeval.cli`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from pathlib import Path

from peeval.records import PPL_PREFIX, PROVENANCE_KEY, clip_text

from .._io import Claimed, claim_dir, dumps_json, replace_files
from .provenance import check_tokenizer, checkpoint_hash, like_line, provenance, weights_path
from .provenance import git_commit as git_commit  # re-exported: callers imported them from here
from .provenance import library_versions as library_versions
from .provenance import now_iso as now_iso
from .provenance import run_kind as run_kind

PEEVAL_TASKS = Path(__file__).resolve().parent.parent / "tasks"


def parse_model_args(s: str | None) -> dict:
    """``k=v,k2=v2`` with lm-eval's own typing of the values; a key given twice is refused (lm-eval keeps the last:
    ``pretrained=A,pretrained=B`` scored B under a command that names A first)."""
    from lm_eval.utils import simple_parse_args_string

    keys = [part.split("=", 1)[0].strip() for part in (s or "").split(",") if "=" in part]
    if twice := sorted({k for k in keys if keys.count(k) > 1}):
        raise ValueError(f"--model_args: {', '.join(twice)} given twice; give each key once")
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


def task_manager(names: list[str], metadata: dict | None, include: list[str] = ()):
    """A TaskManager over peeval's tasks, ``include`` (lm-eval's ``--include_path``) and only the
    lm-eval folders the names need."""
    import lm_eval.tasks
    from lm_eval.tasks import TaskManager

    from peeval.tasks.family import family_of
    from peeval.tasks.groups import builtin_dirs  # the lm-eval folders of peeval's suites

    root = Path(lm_eval.tasks.__file__).parent  # the folders of the families of lm-eval's own tasks
    own = [str(root / d) for n in names if (f := family_of(n)) for d in f.lm_eval_dirs]
    suites = [*builtin_dirs(names), *dict.fromkeys(own), *include]
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
            tm = TaskManager(include_path=[str(PEEVAL_TASKS), *include], metadata=metadata)
            unknown = [n for n in names if n not in tm.all_tasks]
            if unknown:
                raise EvalInputError(f"--tasks: unknown task(s) {', '.join(unknown)}")
    return tm


def _resolved(value) -> str:
    """A local path made absolute (so ``a/tape`` and ``b/tape`` differ); anything else as given."""
    v = str(value)
    return os.path.realpath(os.path.expanduser(v)) if os.path.exists(os.path.expanduser(v)) else v


def run_name(args, model_args: dict) -> str:
    """``--run_name``, else ``<model>__<checkpoint folder>__<tasks>__<hash>``: the hash (8 hex) is of
    the model name, every model_arg with paths resolved and every setting that changes the numbers
    (limit, few-shot, metadata, seed, lm-eval's passed-through flags), so two checkpoints with the
    same last folder name (``a/tape``, ``b/tape``), or one checkpoint run another way, never share a
    results folder; the same run asked for again finds its folder (and is refused without --overwrite)."""
    if args.run_name is not None:
        name = args.run_name
        # used as given, never silently rewritten (300 characters or `x<script>` became another folder's name)
        if not re.fullmatch(r"[A-Za-z0-9._+-]{1,150}", name) or name.strip(".") == "":
            raise EvalInputError(
                f"--run_name {name[:60]!r}{'…' if len(name) > 60 else ''}: allowed one folder name of 1-150 letters, "
                "digits, '.', '_', '+' or '-' (not '.' or '..'): it is created inside --output_path"
            )
        return name
    ckpt = Path(str(model_args.get("pretrained", "model"))).name
    settings = {"limit": args.limit, "num_fewshot": args.num_fewshot, "metadata": parse_metadata(args.metadata),
                "seed": args.seed, **lm_eval_flags(args)}  # fmt: skip
    settings = {k: v for k, v in sorted(settings.items()) if v not in (None, 0, {}, "")}  # defaults: the old names
    model = [args.model, {k: _resolved(v) for k, v in sorted(model_args.items())}]
    key = json.dumps(model + ([settings] if settings else []), default=str)
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]
    head = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{args.model}__{ckpt}__{'+'.join(args.tasks)}")[:140]
    return f"{head}__{digest}"


def _hf_model():
    from peeval.harness.any_lm import PeevalHFLM

    return PeevalHFLM


class EvalInputError(ValueError):
    """A bad ``peeval eval`` input: reported as one line, exit code 2."""


#: lm-eval's ``run`` flags that ``simple_evaluate`` (or the task index) reads: ``peeval eval`` passes them
#: through, parsed by lm-eval's own parser. Its logging integrations (W&B, Trackio, the Hub) belong to
#: lm-eval's CLI, which peeval eval does not run.
PASSED_THROUGH = ("apply_chat_template", "system_instruction", "fewshot_as_multiturn", "gen_kwargs", "max_batch_size",
                  "use_cache", "cache_requests", "check_integrity", "write_out", "predict_only",
                  "confirm_run_unsafe_code", "samples", "include_path", "verbosity", "trust_remote_code",
                  "log_samples", "show_config")  # fmt: skip


def _lm_eval_run_parser():
    import argparse

    from lm_eval._cli.run import Run

    parser = Run(argparse.ArgumentParser(prog="peeval eval", add_help=False).add_subparsers())._parser

    def error(message):
        raise EvalInputError(f"lm-eval flags: {message}")

    parser.error = error
    return parser


def parse_lm_eval_flags(extra: list[str]) -> dict:
    """``extra`` (what ``peeval eval`` does not define) read by lm-eval's own ``run`` parser: the flags
    given, by name. A flag neither knows is one line; one of lm-eval's logging integrations too."""
    if not extra:
        return {}
    parser = _lm_eval_run_parser()
    defaults, given = vars(parser.parse_args([])), vars(parser.parse_args(extra))
    flags = {k: v for k, v in given.items() if k != "func" and (k not in defaults or defaults[k] != v)}
    for k in flags:
        if k not in PASSED_THROUGH:
            raise EvalInputError(f"--{k} is lm-eval's own CLI (not an evaluation setting): run lm_eval for it")
    return flags


def lm_eval_flags(args) -> dict:
    return getattr(args, "lm_eval_flags", None) or {}


def simple_evaluate_kwargs(flags: dict) -> dict:
    """The passed-through flags as ``simple_evaluate`` arguments (``include_path``, ``log_samples``,
    ``show_config`` and ``trust_remote_code`` are used where they apply; samples are always written)."""
    from lm_eval._cli.utils import try_parse_json

    skip = ("include_path", "log_samples", "show_config", "trust_remote_code", "cache_requests", "samples")
    kw = {k: v for k, v in flags.items() if k not in skip}
    kw.update(flags.get("cache_requests") or {})  # lm-eval's parser gives the three request-cache switches
    if flags.get("samples"):
        kw["samples"] = try_parse_json(flags["samples"])
    return kw


_MD_EXAMPLE = '{"lengths": [512]}'


def parse_metadata(text: str | None) -> dict:
    if not text:
        return {}
    try:
        md = json.loads(text)
    except json.JSONDecodeError as e:
        raise EvalInputError(f"--metadata is not valid JSON ({e}): give an object, e.g. '{_MD_EXAMPLE}'") from e
    except RecursionError:
        raise EvalInputError(f"--metadata is nested too deeply: give a flat object, e.g. '{_MD_EXAMPLE}'") from None
    if not isinstance(md, dict):
        raise EvalInputError(f"--metadata must be a JSON object, e.g. '{_MD_EXAMPLE}', not {md!r}")
    return md


def parse_limit(value: float | None) -> int | float | None:
    """lm-eval's semantics made strict: a fraction in (0, 1) of each task's documents, or a whole
    count >= 1 (lm-eval would truncate 2.5 to 2 and turn 0 or a negative into a traceback)."""
    if value is None:
        return None
    if math.isfinite(value) and 0 < value < 1:
        return value
    if math.isfinite(value) and value >= 1 and value == int(value):
        return int(value)
    raise EvalInputError(f"--limit {value:g}: give a fraction in (0, 1) or a whole number of documents >= 1")


#: ``--device`` values lm-eval places a model on (``cuda:N``, ``npu:N``, ``xpu:N``, ``hpu:N`` with an index)
DEVICE_RE = re.compile(r"(cpu|cuda|mps|(cuda|npu|xpu|hpu|mps):\d+)")
_BATCH = "an integer >= 1, auto, or auto:N (N >= 1: recompute the automatic size N times)"


def check_eval_args(args) -> None:
    """``--device``, ``--batch_size`` and ``--num_fewshot`` as lm-eval reads them, checked before anything
    is loaded (lm-eval would put an unknown device on the CPU silently, and take a batch size of 0 or -3
    or -1 few-shot examples without a word); ``--batch_size`` normalised to an int or ``auto[:N]``."""
    dev = args.device
    if dev is not None and not DEVICE_RE.fullmatch(dev):
        raise EvalInputError(f"--device {dev}: allowed cpu, cuda, cuda:N, mps (or npu:N, xpu:N, hpu:N)")
    if dev is not None and dev.startswith("cuda:"):
        import torch

        n = torch.cuda.device_count()
        if torch.cuda.is_available() and int(dev.split(":")[1]) >= n:
            raise EvalInputError(f"--device {dev}: this machine has {n} CUDA device(s), allowed cuda:0 .. cuda:{n - 1}")
    bs = args.batch_size
    if bs is not None:
        text = str(bs).strip()
        head, sep, tail = text.partition(":")
        if head == "auto":
            try:
                ok = not sep or float(tail) >= 1
            except ValueError:
                ok = False
            if not ok:
                raise EvalInputError(f"--batch_size {bs}: allowed {_BATCH}")
            args.batch_size = text
        else:
            try:
                args.batch_size = int(text)
            except ValueError:
                raise EvalInputError(f"--batch_size {bs}: allowed {_BATCH}") from None
            if args.batch_size < 1:
                raise EvalInputError(f"--batch_size {bs}: allowed {_BATCH}")
    if args.num_fewshot is not None and args.num_fewshot < 0:
        raise EvalInputError(f"--num_fewshot {args.num_fewshot}: allowed an integer >= 0 (examples in each prompt)")


def _max_length_for(metadata: dict) -> int | None:
    """Room for the longest prompt/window asked for (None when ``lengths`` is malformed: the
    task then names the problem)."""
    lengths = metadata.get("lengths")
    lengths = [lengths] if isinstance(lengths, int) else lengths
    if not isinstance(lengths, list) or not lengths:
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in lengths):
        return None
    return max(lengths) + 64


#: the claim ``peeval eval`` holds on its results folder while it runs (``_io.claim_dir``)
EVAL_LOCK = ".peeval-eval.lock"


def _earlier_run(out: Path) -> list[Path]:
    """An earlier run's files, results.json first: the folder is never a finished run whose samples
    belong to another."""
    return [out / "results.json", *sorted(out.glob("samples_*.jsonl"))]


def _check_output(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise EvalInputError(f"--output_path/--run_name: {out} exists and is not a folder")
    if (out / "results.json").exists() and not overwrite:
        raise EvalInputError(
            f"{out} already holds a finished run (results.json): pass --overwrite to replace it "
            "(its samples are deleted first), or another --run_name / --output_path"
        )


LIST_TASKS = {"list": {}, "list_groups": {"list_tags": False, "list_subtasks": False},
              "list_tags": {"list_groups": False, "list_subtasks": False},
              "list_subtasks": {"list_groups": False, "list_tags": False}}  # fmt: skip


def run_eval(args) -> int:
    """Evaluate, then write the run; a bad input is one line (exit 2) and writes nothing."""
    like = None
    if getattr(args, "like", None):
        from peeval.evaluation.like import apply

        like = apply(args)  # the published protocol, filled into args
        print(like.describe())
    if not args.tasks:
        raise EvalInputError("--tasks: required (comma-separated task names), or --like PROFILE")
    args.like_protocol = like
    if len(args.tasks) == 1 and args.tasks[0] in LIST_TASKS:  # as lm_eval --tasks list: peeval's tasks
        from lm_eval.tasks import TaskManager

        paths = [str(PEEVAL_TASKS), *(lm_eval_flags(args).get("include_path") or "").split(",")]
        tm = TaskManager(include_path=[p for p in paths if p], include_defaults=False)
        print(tm.list_all_tasks(**LIST_TASKS[args.tasks[0]]))
        return 0
    if not args.model:
        raise EvalInputError("--model: required (peeval, peeval-<pe>, peeval-llama or an lm-eval model name)")
    if args.model == "hf":  # lm-eval's HFLM as peeval's wrapper: the device this machine has, exact ppl windows
        args.model = "peeval-hf"
    check_eval_args(args)
    metadata = parse_metadata(args.metadata)
    from peeval.tasks.metadata_keys import check_requested

    check_requested(args.tasks, metadata)  # each key is read by a task of this run
    limit = parse_limit(args.limit)
    model_args = parse_model_args(args.model_args)
    auto_len = _max_length_for(metadata)
    if auto_len is None and "lengths" not in metadata and any(t.startswith("peeval_ppl") for t in args.tasks):
        from peeval.tasks.ppl.ppl import DEFAULT_LENGTHS  # the perplexity task's own lengths

        auto_len = max(DEFAULT_LENGTHS) + 64
    if "max_length" not in model_args and auto_len and args.model.startswith("peeval"):
        # a passkey prompt of length L must not be left-truncated to the training length
        model_args["max_length"] = auto_len
    from peeval.tasks.ppl.ppl import check_fits

    try:  # a model_args max_length shorter than a perplexity length: before any weights are read
        check_fits(args.model, model_args, args.tasks, metadata)
    except ValueError as e:
        raise EvalInputError(str(e)) from None
    out = Path(args.output_path) / run_name(args, model_args)
    from peeval._io.outputs import overlap

    read = [model_args.get(k) for k in ("pretrained", "tokenizer", "peft", "delta")]
    if (hit := overlap(out, [str(r) for r in read if r])) is not None:  # never into the model being scored
        raise EvalInputError(f"--output_path/--run_name: {out} is or lies inside the input {hit}; write it elsewhere")
    _check_output(out, args.overwrite)
    if int(os.environ.get("RANK", "0")) != 0:  # a launch's other processes: rank 0 claims and writes
        return _evaluate(args, metadata, limit, model_args, out)
    try:
        with claim_dir(out, EVAL_LOCK):  # two runs into one folder: the second is refused at once
            _check_output(out, args.overwrite)  # finished between the first check and the claim
            return _evaluate(args, metadata, limit, model_args, out)
    except Claimed as e:
        raise EvalInputError(f"--run_name: {e}: wait for it, or choose another --run_name / --output_path") from None


#: lm-eval's four random generators: ``--seed`` seeds them all
LM_EVAL_SEEDS = ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed")


def _build_tasks_first(tm, names: list[str]) -> None:
    """Build the tasks now, before any weights are read (bad task metadata fails in a second), and
    hand these same objects to ``simple_evaluate``'s one ``tm.load(names)`` call."""
    loaded = [tm.load(list(names))]

    def load(task_list):
        if loaded and list(task_list) == list(names):
            return loaded.pop()
        return type(tm).load(tm, task_list)

    tm.load = load


def task_hashes(samples: dict) -> dict[str, str]:
    """lm-eval's per-task hash of the documents, prompts and targets scored (as its own results file)."""
    from lm_eval.utils import hash_string

    return {task: hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in rows))
            for task, rows in samples.items()}  # fmt: skip


#: perplexity samples keep this many characters of a longer text (head and tail; the doc_hash names the whole)
SAMPLE_TEXT_LIMIT = 1000


def clip_texts(value):
    """``value`` with every string longer than SAMPLE_TEXT_LIMIT cut to its head and tail. Used on the
    perplexity tasks' samples, whose every row repeats its whole book in doc, target and arguments (22
    books x 5 lengths: 166 MB a task); other tasks' samples are written as lm-eval gives them."""
    if isinstance(value, str):
        return clip_text(value, SAMPLE_TEXT_LIMIT)
    if isinstance(value, dict):
        return {k: clip_texts(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clip_texts(v) for v in value]
    return value


def _evaluate(args, metadata: dict, limit, model_args: dict, out: Path) -> int:
    """Evaluate with every dataset the tasks read recorded: results.json names it per task."""
    from peeval.data import recording

    with recording() as reads:
        return _evaluate_recorded(args, metadata, limit, model_args, out, reads)


def _evaluate_recorded(args, metadata: dict, limit, model_args: dict, out: Path, reads: dict) -> int:
    from lm_eval import evaluator
    from lm_eval.api.registry import get_model
    from lm_eval.loggers import EvaluationTracker

    from peeval.evaluation.quiet import quiet

    # the known-benign lm-eval / transformers warnings (peeval/evaluation/quiet.py)
    quiet(getattr(args, "verbose", False))
    # the model's tokenizer reaches the tasks as under plain lm_eval (passkey counts lengths in its tokens)
    model_source = {k: model_args[k] for k in ("pretrained", "gguf_file", "tokenizer") if model_args.get(k)}
    flags = lm_eval_flags(args)
    include = [p for p in str(flags.get("include_path") or "").split(",") if p]
    tm = task_manager(args.tasks, {**model_source, **metadata} or None, include)
    _build_tasks_first(tm, args.tasks)
    try:  # peeval-hf from its module: an install whose .pth hook predates it still runs `--model hf`
        model_cls = get_model(args.model) if args.model != "peeval-hf" else _hf_model()
    except (ValueError, KeyError) as e:
        raise EvalInputError(f"--model {args.model!r} is not a registered lm-eval model ({e})") from e
    extra = {"batch_size": args.batch_size, "device": args.device}
    if flags.get("trust_remote_code"):
        model_args = {**model_args, "trust_remote_code": True}
    sha256 = checkpoint_hash(weights_path(model_args))  # of the files about to be loaded, not of later ones
    lm = model_cls.create_from_arg_obj(model_args, {k: v for k, v in extra.items() if v is not None})
    try:  # the tokenizer scored with: fits the model, is the training's (before anything is scored)
        tokenizer_hash = check_tokenizer(lm, model_args)
    except ValueError as e:
        raise EvalInputError(str(e)) from None
    if getattr(args, "like_protocol", None) is not None:  # what differs from the board, before anything is scored
        print(like_line(args.like_protocol, lm, tokenizer_hash))
    tracker = EvaluationTracker()  # lm-eval's record of the run: model name, start / end time
    # lm-eval's bootstrap stderr forks a multiprocessing Pool from this process, which holds torch's threads: a
    # forked worker can wait forever on a lock it inherited held (a CI run hung 15 min in SemLock.__enter__).
    # lm-eval's own switch runs the same seeded draws (random.Random(i) per chunk) in one process: equal numbers.
    os.environ.setdefault("DISABLE_MULTIPROC", "1")
    results = evaluator.simple_evaluate(
        model=lm,
        tasks=args.tasks,
        task_manager=tm,
        limit=limit,
        log_samples=True,
        num_fewshot=args.num_fewshot,
        evaluation_tracker=tracker,
        **dict.fromkeys(LM_EVAL_SEEDS, args.seed),
        **simple_evaluate_kwargs(flags),
    )
    if results is None:  # not rank 0
        return 0
    samples = results.pop("samples", {})
    general = tracker.general_config_tracker  # given a model object, lm-eval names no model: name it as lm_eval would
    general.model_source, general.model_name = args.model, str(model_args.get("pretrained") or general.model_name)
    general.log_end_time()
    results["task_hashes"] = task_hashes(samples)  # what lm_eval's own results file holds beside the numbers
    results.update(dataclasses.asdict(general))
    data = {task: reads[task] for task in sorted(reads)}
    if checkpoint_hash(weights_path(model_args)) != sha256:  # retrained (--overwrite) while it was scored
        raise EvalInputError(
            f"--model_args pretrained={model_args.get('pretrained')}: the checkpoint's weights changed while it was "
            "evaluated (retrained or copied over meanwhile): nothing written; evaluate it again"
        )
    if getattr(args, "like_protocol", None) is not None:  # the published runs' documents, or nothing written
        from peeval.evaluation.like import check_documents

        check_documents(args.like_protocol, data)
    results[PROVENANCE_KEY] = provenance(args, lm, model_args, metadata, data, sha256, tokenizer_hash)
    if getattr(args, "like_protocol", None) is not None:  # whose columns this run fills (peeval.evaluation.like)
        results[PROVENANCE_KEY]["like"] = args.like_protocol.profile
    _check_output(out, args.overwrite)  # a run that finished meanwhile in the same folder is not replaced silently
    clip = {task: task.startswith(PPL_PREFIX) for task in samples}

    def line(task: str, row) -> str:  # valid JSON: ±inf (an exploding perplexity) as "inf", NaN as null
        return dumps_json(clip_texts(row) if clip[task] else row, infinity="inf", default=str) + "\n"

    files = {f"samples_{task}.jsonl": "".join(line(task, r) for r in rows) for task, rows in samples.items()}
    # the samples files this run wrote, by name: ingest refuses the run when one is missing or another lies beside it
    results[PROVENANCE_KEY]["samples_files"] = sorted(files)
    files["results.json"] = dumps_json(results, infinity="inf", default=str, indent=1)  # last: the run is finished
    replace_files(out, files, stale=_earlier_run(out))  # the old run stays until the new one is written
    from lm_eval.utils import make_table

    if flags.get("show_config"):
        print(files["results.json"])
    print(make_table(results))
    print(f"peeval eval: results in {out / 'results.json'}")
    return 0
