"""Shared by the stage scripts: the repository root, params.yaml, and the output layout."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from peeval.records import SHAPE_KEYS

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `leaderboard` is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))
if str(ROOT / "pipelines") not in sys.path:  # its siblings (pipeline_params), also when imported from elsewhere
    sys.path.insert(0, str(ROOT / "pipelines"))

TOKENIZER = Path("checkpoints/tokenizer")
PRETRAIN = Path("checkpoints/pretrain")
DIAG = Path("checkpoints/diag")
ADAPT = Path("checkpoints/adapt")
EXTEND = Path("checkpoints/extend")  # the pipeline's own rope model extended (params.yaml extend)
RESULTS = Path("results")
DB = Path("leaderboard/peeval.duckdb")
SITE = Path("leaderboard/public")

if TYPE_CHECKING:
    from pipeline_params import PipelineParams


def params() -> PipelineParams:
    """params.yaml (the parameter file of the active profile), read from the directory DVC runs the
    stage in and checked (``pipeline_params``: every key, type and cross-key rule) before the stage
    does anything: a bad file is one line naming the key, exit code 2. The stage reads the typed,
    checked object, never the raw file."""
    from pipeline_params import ParamsError, load

    try:
        _, typed = load(Path("params.yaml"))
    except ParamsError as e:
        print(e, file=sys.stderr)
        raise SystemExit(2) from None
    return typed


def use_mirror() -> Path:
    """Point the package at the mirror DVC watches (params.yaml `data.root`, relative to the
    repository), so that what a stage reads is what `dvc status` checks."""
    root = (ROOT / params().data.root).resolve()
    env = os.environ.get("PEEVAL_DATA_MIRROR")
    if env and Path(env).resolve() != root:
        raise SystemExit(
            f"PEEVAL_DATA_MIRROR={env} but params.yaml data.root names {root}: the pipeline reads and "
            "watches data.root, so set it to the same folder (or unset PEEVAL_DATA_MIRROR)"
        )
    os.environ["PEEVAL_DATA_MIRROR"] = str(root)
    return root


def use_compile_cache() -> Path:
    """One inductor graph cache for every training stage of the repository (``.cache/inductor``,
    unless TORCHINDUCTOR_CACHE_DIR names one): a compiled run (peeval/training/speed.py) compiles each
    distinct graph once, and the other seeds and stages of the pipeline load it in seconds."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "inductor"))
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def entry(entries: dict[str, Any], section: str, key: str) -> Any:
    """``entries[key]`` (params.yaml ``<section>.<key>``: a stage's command-line argument), or one
    line and exit 2."""
    if key not in entries:
        print(f"params.yaml: no {section}.{key} (known: {sorted(entries)})", file=sys.stderr)
        sys.exit(2)
    return entries[key]


def diag_name(run: str, seed: int | str) -> str:
    """The folder of a diagnostics run's model and results: checkpoints/diag/<name>, results/diag/<name>
    (dvc.yaml spells the same ``${item.run}-s${item.seed}``)."""
    return f"{run}-s{seed}"


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: cannot read ({e})") from e


# -- params.yaml `launcher`: run a training / evaluation stage on several processes ----------------
#: the launchers a stage may run under, as modules of the stage's own interpreter (so the venv's)
LAUNCHERS = {"accelerate launch": "accelerate.commands.launch", "torchrun": "torch.distributed.run"}


def launcher_argv(launcher: str) -> list[str]:
    """The command that prefixes ``<stage script> <args>`` for params.yaml ``launcher`` ("" -> []).

    Checked with the launcher's own argument parser; a launch that would silently start one
    process (``accelerate launch --num_processes N`` without ``--multi_gpu`` on a machine with
    fewer than N GPUs, e.g. ``--cpu``) is refused. Raises ``ValueError`` (one line) if not allowed."""
    import shlex

    allowed = "'' (one process), 'accelerate launch [options]' or 'torchrun [options]'"
    if not isinstance(launcher, str):
        raise ValueError(f"params.yaml launcher={launcher!r}: a string, allowed {allowed}")
    try:
        words = shlex.split(launcher)
    except ValueError as e:
        raise ValueError(f"params.yaml launcher={launcher!r}: {e}") from None
    if not words:
        return []
    name = next((k for k in LAUNCHERS if words[: len(k.split())] == k.split()), None)
    if name is None:
        raise ValueError(f"params.yaml launcher={launcher!r}: allowed {allowed}")
    opts = words[len(name.split()) :]
    args = _parse_launcher(name, opts, launcher)
    if name == "accelerate launch":
        n = args.num_processes or 1
        from accelerate.commands.config import default_config_file

        configured = args.config_file or os.path.isfile(default_config_file)  # `accelerate config` decides
        multi = args.multi_gpu or args.use_deepspeed or args.use_fsdp or configured or args.mpirun_hostfile
        if n > 1 and not multi:
            import torch

            if args.cpu or torch.cuda.device_count() < n:
                raise ValueError(
                    f"params.yaml launcher={launcher!r} starts ONE process here (accelerate's multi-CPU path "
                    f"needs --mpirun_hostfile; this machine has {torch.cuda.device_count()} GPUs): use 'accelerate "
                    f"launch --multi_gpu --num_processes {n}' (gloo on CPUs) or 'torchrun --nproc_per_node {n}'"
                )
    return [sys.executable, "-m", LAUNCHERS[name], *opts]


def _parse_launcher(name: str, opts: list[str], launcher: str):
    """``opts`` through the launcher's own parser (with a placeholder script); one line on error."""
    import contextlib
    import io

    if name == "accelerate launch":
        from accelerate.commands.launch import launch_command_parser

        parser = launch_command_parser()
    else:
        from torch.distributed.run import get_args_parser

        parser = get_args_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args([*opts, "pipelines/stage.py"])
    except SystemExit:
        why = next((ln for ln in reversed(err.getvalue().splitlines()) if "error:" in ln), err.getvalue().strip())
        raise ValueError(f"params.yaml launcher={launcher!r}: {why.split('error:', 1)[-1].strip()}") from None
    if args.training_script != "pipelines/stage.py":
        raise ValueError(f"params.yaml launcher={launcher!r}: options only, the stage names its own script")
    return args


def run_stage(p: PipelineParams, script: str, args: list[str]) -> None:
    """Replace this process by ``python <script> <args>``, or, if params.yaml names a ``launcher``,
    by ``<launcher> <script> <args>`` (the stage then runs once per process: the processes split
    each batch, rank 0 writes). A bad launcher ends the stage with one line, exit 2, before
    anything is started or written."""
    if not Path(script).is_file():
        print(f"launch: no stage script {script!r}", file=sys.stderr)
        sys.exit(2)
    try:
        prefix = launcher_argv(p.launcher)
    except ValueError as e:
        print(f"launch: {e}", file=sys.stderr)
        sys.exit(2)
    argv = [*(prefix or [sys.executable]), script, *args]
    if prefix:
        print("launch: " + " ".join(argv), file=sys.stderr, flush=True)
    os.execv(argv[0], argv)


# -- a profile's smoke-sized twin (tests: the gpu profile's stage structure on the CPU) -------------
def _smoke_rung(i: int) -> dict:
    """The ``i``-th ladder rung of a smoke twin: heads of 8 as smoke's, a width other than smoke's 32."""
    width = (16, 24, 40, 48, 56, 64)[i]
    return {"hidden_size": width, "intermediate_size": 2 * width, "num_attention_heads": width // 8,
            "num_key_value_heads": width // 8}  # fmt: skip


def smoke_twin(p: dict) -> dict:
    """``p`` with the same stages (encodings, diagnostics runs x seeds, adapt methods,
    shift encodings, eval suites and their tasks) at the ``smoke`` sizes: every size and step
    override dropped (a ladder rung's shape: a smoke-sized one of its own), evaluation lengths,
    counts and limits tiny, one process."""
    import copy

    t = copy.deepcopy(p)
    t.update(profile="smoke", launcher="")
    t["tokenizer"]["set"] = {}
    # smoke's 64-token context is shorter than some zero-shot answers in its 384-token BPE (lm-eval
    # refuses a continuation longer than the model): 256 tokens, still seconds per encoding
    t["train"]["set"] = {"seq_len": 256}
    rungs: dict[str, dict] = {}  # each ladder rung's shape (issue 43) -> a smoke-sized shape of its own
    for enc in t["encodings"].values():
        shape = json.dumps({k: v for k, v in (enc.get("set") or {}).items() if k in SHAPE_KEYS}, sort_keys=True)
        enc["set"] = dict(rungs.setdefault(shape, _smoke_rung(len(rungs)))) if shape != "{}" else {}
    d = t["diagnostics"]
    d["train"] = {"set": {}, "task_set": {}}
    d["eval"] = {"profile": "cpu", "n": 8, "limit": 16}
    t["shift"].update(sequences=2, length=32)
    t["adapt"]["train"]["set"] = {}
    for suite in t["eval"]["suites"].values():
        meta = suite.get("metadata") or {}
        if "lengths" in meta:  # smoke's own (params/smoke.yaml): its BPE spends 151 tokens on the passkey prompt's
            meta["lengths"] = [32, 64, 128]  # fixed text, and the window is the longest length + 64
        meta.update({k: v for k, v in {"per_cell": 1, "max_docs": 1, "max_windows": 1, "targets": 64, "skip": 0}.items()
                     if k in meta})  # fmt: skip
        if "depths" in meta:
            meta["depths"] = [0.0, 1.0]
        suite["metadata"] = meta
        suite["limit"] = None if "lengths" in meta else 4
    return t
