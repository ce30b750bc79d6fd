"""The pipeline's parameter file (params.yaml, generated from one of params/<name>.yaml) as typed, checked data.

Words: a *profile* is a training-size preset of ``peeval/training/profiles.py`` (smoke, cpu, gpu,
paper); params.yaml's ``profile`` key names one. The files params/<name>.yaml are *parameter
files*, one per profile or variant; one may say ``extends: <name>`` and list only what it adds or
changes (``cpu-claims`` is ``cpu`` plus seeds and runs): mappings merge key by key, any other value
replaces (``peeval.settings.compose``). ``pipelines/use_profile.py`` writes the composed file to
params.yaml (:func:`render`), the one file DVC reads. The ``diagnostics.eval.profile`` key is the
diagnostic generators' size set (``gen_profile``: cpu|paper).

Every stage loads params.yaml through :func:`load` (``common.params()``) and receives the
:class:`PipelineParams` it returns, so a wrong key, type or combination is one line naming the key
(exit 2) before the stage writes anything. Torch-free: the names it checks against are read from
their owners (``peeval.registry`` for encodings, adapt methods and diagnostic tasks,
``peeval.training.profiles`` for profiles).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BeforeValidator, model_validator

from peeval.records import SHAPE_KEYS, model_shape
from peeval.registry import DIAG_TASKS, GEN_PROFILES, encoding_names
from peeval.registry.declarations import adapt_methods
from peeval.settings import (
    EXTENDS,
    Allowed,
    At,
    SetMap,
    SettingsError,
    Strict,
    check,
    compose,
    did_you_mean,
    integer,
    nonempty,
    null_is_empty,
)
from peeval.tasks.diagnostics import generators
from peeval.tasks.metadata_keys import check_requested
from peeval.training.profiles import TRAIN_PROFILES, get_profile
from peeval.training.speed import check_compile

#: lm-eval tasks that cannot run on the offline mirror -> the peeval task that runs the same prompts
#: (lm-eval's `hellaswag` builds its train split even at 0-shot; the mirror holds only validation)
MIRROR_TASKS = {"hellaswag": "peeval_hellaswag"}

#: a run's name is a folder name (checkpoints/diag/<name>-s<seed>) and a DVC stage-name part
_RUN_NAME = re.compile(r"[a-z0-9][a-z0-9_]*(-[a-z0-9_]+)*")


class ParamsError(SettingsError):
    """One line: the params.yaml key, its value and what is allowed."""


def _distinct(v: list) -> list:
    if len(set(v)) != len(v):
        raise ValueError("names repeat")
    return v


def _one_of(allowed, what: str = "") -> AfterValidator:
    """Every name in ``allowed()`` (a callable: the owners' registries are read when checked)."""

    def check_names(v: list[str]) -> list[str]:
        known = list(allowed())
        bad = [x for x in v if x not in known]
        if bad:
            raise ValueError(f"unknown {', '.join(map(repr, bad))}; allowed {what}{', '.join(known)}")
        return v

    return AfterValidator(check_names)


#: a list of distinct names
Names = Annotated[list[str], AfterValidator(_distinct), Allowed("a list of names")]


def _pe(v: str) -> str:
    if v not in encoding_names():
        raise ValueError(f"allowed {', '.join(encoding_names())}")
    return v


Pe = Annotated[str, AfterValidator(_pe)]


class Encoding(Strict):
    """One pretraining run (encodings.<name>); entries of one pe / pe_options are its seeds."""

    pe: Pe
    pe_options: SetMap = {}
    set: SetMap = {}
    seed: integer(0, null=True) = None  # the pretraining seed of this entry (None: the top-level seed)


def _task(v: str) -> str:
    if v not in DIAG_TASKS:
        raise ValueError(f"allowed {', '.join(DIAG_TASKS)}")
    return v


class DiagRun(Strict):
    """One diagnostics.runs entry: an encoding trained on one diagnostic task (a model per seed), with the
    task generator's parameters that define it (``task_params: {n_vars: 3}``: CoPE's 3-variable counting),
    which its training and its evaluation both receive."""

    pe: Pe
    pe_options: SetMap = {}
    task: Annotated[str, AfterValidator(_task)]
    task_params: SetMap = {}

    @model_validator(mode="after")
    def _generator_params(self):
        allowed = generators.params(self.task)
        for key, value in self.task_params.items():
            if key not in allowed:
                raise At(f"task_params.{key}", f"not a parameter of the {self.task} generator; allowed "
                         f"{', '.join(sorted(allowed))}{did_you_mean(key, allowed)}", value)  # fmt: skip
        try:  # a value the generator refuses (counting n_vars 0 or 9) fails here, not in a training stage
            generators.generate(self.task, generators.VAL_SPLIT, 1, **self.task_params)
        except (ValueError, TypeError, IndexError) as e:
            raise At("task_params", f"a value the {self.task} generator accepts ({e})", self.task_params) from None
        return self


def _run_name(v: str) -> str:
    if not _RUN_NAME.fullmatch(v):
        raise ValueError("a name of lower-case letters, digits, '_' and '-' (conventionally <encoding>-<task>)")
    return v


def _task_key(v: str) -> str:  # a task no run trains is allowed: parameter files share task_set
    if v not in DIAG_TASKS:
        raise ValueError(f"not a diagnostic task; allowed {', '.join(DIAG_TASKS)}")
    return v


class DiagTrain(Strict):
    set: SetMap = {}  # every run (on top of the diag profile)
    # the training step's path (peeval train --compile): gpu-diag trains eagerly, its runs too short to pay a compile
    compile: Annotated[str, AfterValidator(check_compile)] = "auto"
    # issue 64: the fast diagnostics trainer (peeval.training.fast_diag: compiled, on-device); eager fit otherwise
    fast_step: Annotated[bool, Allowed("true or false")] = False
    task_set: Annotated[dict[Annotated[str, AfterValidator(_task_key)], SetMap], BeforeValidator(null_is_empty)] = {}

    def overrides(self, task: str) -> dict[str, Any]:
        """The settings a run of ``task`` trains with, on top of the profile: set, then task_set.<task>."""
        return {**self.set, **self.task_set.get(task, {})}


def _gen(v: str) -> str:
    if v not in GEN_PROFILES:
        raise ValueError(f"generator sizes, allowed {', '.join(GEN_PROFILES)}")
    return v


class DiagEval(Strict):
    profile: Annotated[str, AfterValidator(_gen)]
    n: integer(1)
    limit: integer(1, null=True)


def _seeds(v: list[int]) -> list[int]:
    if not v or len(set(v)) != len(v):
        raise ValueError(_SEEDS)
    return v


_SEEDS = "a non-empty list of distinct integers >= 0"
Seeds = Annotated[list[integer(0)], AfterValidator(_seeds), Allowed(_SEEDS)]


class Diagnostics(Strict):
    runs: Annotated[
        dict[Annotated[str, AfterValidator(_run_name)], DiagRun],
        nonempty("empty; name at least one run ({<name>: {pe, task}})"),
    ]
    seeds: Seeds
    train: DiagTrain
    eval: DiagEval

    @property
    def tasks(self) -> list[str]:
        """The tasks of the runs, in order of first appearance."""
        return list(dict.fromkeys(r.task for r in self.runs.values()))

    def run_overrides(self, run: str) -> dict[str, Any]:
        """What diagnostics@<run> trains with on top of the profile: train.set, train.task_set.<task>, then
        the run's own task_params merged into theirs (a run without task_params: exactly train's)."""
        r = self.runs[run]
        out = self.train.overrides(r.task)
        if r.task_params:
            out["task_params"] = {**out.get("task_params", {}), **r.task_params}
        return out

    def run_task_params(self, run: str, profile: str) -> dict[str, Any]:
        """The generator parameters diagnostics@<run> trained with under ``profile``: its evaluation's too."""
        return dict(get_profile("diag", profile, self.run_overrides(run))["task_params"])


class Suite(Strict):
    """One eval.suites entry: tasks run in one `peeval eval` start, with one --metadata and --limit."""

    tasks: Annotated[Names, nonempty("empty; name at least one")]
    metadata: SetMap
    limit: integer(1, null=True)

    @model_validator(mode="after")
    def _tasks(self):
        try:  # a misspelt key would be ignored and the task's default scored
            check_requested(self.tasks, self.metadata)
        except ValueError as e:
            raise At("metadata", str(e).removeprefix("--metadata: ")) from None
        for task, instead in MIRROR_TASKS.items():
            if task in self.tasks:
                raise At("tasks", f"{task!r} needs a split the offline mirror lacks; use {instead!r} (same prompts "
                         "and metrics)")  # fmt: skip
        return self


class Eval(Strict):
    pretrain: Names
    adapt: Names
    base: Names  # suites of the adapters' base as shipped (stage eval_base), a subset of adapt
    suites: dict[str, Suite]

    @model_validator(mode="after")
    def _known_suites(self):
        for key, allowed, what in (
            ("pretrain", list(self.suites), "eval.suites keys: "),
            ("adapt", list(self.suites), "eval.suites keys: "),
            ("base", self.adapt, "eval.adapt suites (the adapted rows it is read against): "),
        ):
            bad = [x for x in getattr(self, key) if x not in allowed]
            if bad:
                raise At(key, f"unknown {', '.join(map(repr, bad))}; allowed {what}{', '.join(allowed) or '(none)'}")
        return self


class Data(Strict):
    root: str  # relative to the repository
    mirror: Names


class Sets(Strict):
    set: SetMap


class Shift(Strict):
    encodings: Names
    sequences: integer(1)
    length: integer(2)


class Adapt(Strict):
    methods: Annotated[Names, _one_of(adapt_methods)]
    train: Sets


#: an extension's folder tag: '' (checkpoints/extend/<method>) or '-<name>' (checkpoints/extend/<method>-s1)
_TAG = re.compile(r"(-[a-z0-9_]+)*")


def _tag(v: str) -> str:
    if not _TAG.fullmatch(v):
        raise ValueError("'' or '-' and lower-case letters, digits, '_' (checkpoints/extend/<method><tag>)")
    return v


class ExtendBase(Strict):
    """One model extended (extend.bases entry): ``encoding`` (an encodings key, a rope model) and the ``tag``
    its extensions' folders carry, checkpoints/extend/<method><tag> ('' for one base, '-s1' for its seed 1)."""

    encoding: str
    tag: Annotated[str, AfterValidator(_tag)]


class Extend(Strict):
    """Context extension of the pipeline's own pretrained models (TAPE table 2 scaled down): each of ``bases``
    (rope models, one per seed: the training run is the unit of replication, so each method is trained once
    per base, with that base's seed) adapted with each of ``methods`` on ``train.set`` (seq_len: the new
    window, factor, steps: the same data and steps for every method), read by the ``eval`` suites."""

    bases: Annotated[
        list[ExtendBase],
        Allowed("a list of {encoding: <a rope encodings key>, tag: '' or '-<name>' (lower-case letters, digits, _)}"),
    ]
    methods: Annotated[Names, _one_of(adapt_methods)]
    train: Sets
    eval: Names

    @model_validator(mode="after")
    def _distinct_bases(self):
        for key in ("encoding", "tag"):
            seen = [getattr(b, key) for b in self.bases]
            if len(set(seen)) != len(seen):
                raise At("bases", f"{key}s repeat ({', '.join(map(repr, seen))}); one entry per base, tags distinct")
        return self

    def runs(self) -> dict[str, tuple[str, str]]:
        """Every extension, folder name -> (method, base encoding): ``<method><tag>`` for each method x base."""
        return {f"{m}{b.tag}": (m, b.encoding) for m in self.methods for b in self.bases}


def _profile(v: str) -> str:
    if v not in TRAIN_PROFILES:
        raise ValueError(f"allowed {', '.join(TRAIN_PROFILES)} (peeval/training/profiles.py)")
    return v


def _null_is_blank(v: Any) -> Any:
    return "" if v is None else v


class PipelineParams(Strict):
    """params.yaml: what every stage reads, checked."""

    profile: Annotated[str, AfterValidator(_profile)]
    seed: integer(0)
    launcher: Annotated[str, BeforeValidator(_null_is_blank), Allowed("a string ('' for one process)")]
    data: Data
    tokenizer: Sets
    train: Sets
    encodings: Annotated[dict[str, Encoding], nonempty("empty; name at least one encoding")]
    diagnostics: Diagnostics
    shift: Shift
    adapt: Adapt
    extend: Extend
    eval: Eval
    # issue 64: params/gpu-diag.yaml's device-window plan per paper, checked where it is read
    # (benchmarks/diag_budget.py: no stage reads it)
    windows: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _cross_keys(self):
        _check_seed_entries(self.encodings, self.seed, {**TRAIN_PROFILES[self.profile], **self.train.set})
        bad = [x for x in self.shift.encodings if x not in self.encodings]
        if bad:
            raise At("shift.encodings", f"unknown {', '.join(map(repr, bad))}; allowed encodings.* keys: "
                     f"{', '.join(self.encodings)}")  # fmt: skip
        if self.extend.methods:
            if not self.extend.bases:
                raise At("extend.bases", "empty; name the rope models the methods extend "
                         "([{encoding: rope, tag: ''}, ...])", [])  # fmt: skip
            for i, b in enumerate(self.extend.bases):
                if b.encoding not in self.encodings:
                    raise At(f"extend.bases.{i}.encoding", f"unknown {b.encoding!r}; allowed encodings.* keys: "
                             f"{', '.join(self.encodings)}", b.encoding)  # fmt: skip
                if (pe := self.encodings[b.encoding].pe) != "rope":
                    raise At(f"extend.bases.{i}.encoding", f"encodings.{b.encoding} is pe {pe!r}; the extension "
                             "methods rescale or adapt RoPE: name a rope encoding", b.encoding)  # fmt: skip
            if len(names := self.extend.runs()) != len(self.extend.methods) * len(self.extend.bases):
                raise At("extend.bases", "a method and a tag make the folder name of another extension; "
                         f"choose other tags ({', '.join(names)})", [b.tag for b in self.extend.bases])  # fmt: skip
        bad = [x for x in self.extend.eval if x not in self.eval.suites]
        if bad:
            raise At("extend.eval", f"unknown {', '.join(map(repr, bad))}; allowed eval.suites keys: "
                     f"{', '.join(self.eval.suites)}")  # fmt: skip
        return self

    def seed_of(self, encoding: str) -> int:
        """The pretraining seed of encodings.<encoding> (its own ``seed``, else the top-level one)."""
        s = self.encodings[encoding].seed
        return self.seed if s is None else s

    def train_overrides(self, encoding: str) -> dict[str, Any]:
        """What train@<encoding> sets on top of the profile: train.set, then encodings.<encoding>.set."""
        return {**self.train.set, **self.encodings[encoding].set}


#: what the ``set`` of one encoding's entries may vary: the model's shape and the budget that follows it (a rung of
#: the ladder of sizes, issue 43). Ingest names a model of another shape than the profile's with its size
#: (``rope [4x32]``), so the rungs are rows of their own; every other setting is the encoding's, on every rung
RUNG_KEYS = (*SHAPE_KEYS, "steps", "warmup_steps")
#: the budget every encoding of one rung shares (a comparison at a rung is at one budget)
RUNG_BUDGET = ("steps", "warmup_steps")


def _check_seed_entries(encodings: dict[str, Encoding], seed: int, base: dict[str, Any]) -> None:
    """Entries of one encoding (same pe and pe_options) at one model shape are its seeds: the leaderboard averages
    them in one cell, so they must share every setting and differ in seed. At another shape (``base``: the
    profile with train.set, under each entry's set) they are another row, a rung, that may differ in
    :data:`RUNG_KEYS` only; the encodings of one rung share its budget."""
    first: dict[tuple[str, str], str] = {}  # (encoding, shape) -> its first entry
    any_shape: dict[str, str] = {}  # encoding -> its first entry at any shape
    rung: dict[str, str] = {}  # a shape other than the profile's -> its first entry
    seen: dict[tuple[str, str, int], str] = {}  # (encoding, shape, seed) -> entry
    default = json.dumps(model_shape(base), sort_keys=True)
    for name, e in encodings.items():
        enc = json.dumps([e.pe, e.pe_options], sort_keys=True)
        shape = json.dumps(model_shape({**base, **e.set}), sort_keys=True)
        s = seed if e.seed is None else e.seed
        f = first.setdefault((enc, shape), name)
        if encodings[f].set != e.set:
            raise At(f"encodings.{name}.set", f"differs from encodings.{f}.set={encodings[f].set!r}; entries with the "
                     "same pe, pe_options and model shape are seeds of one leaderboard row and must share set",
                     e.set)  # fmt: skip
        g = any_shape.setdefault(enc, name)
        mine, theirs = ({k: v for k, v in x.items() if k not in RUNG_KEYS} for x in (e.set, encodings[g].set))
        if mine != theirs:
            raise At(f"encodings.{name}.set", f"differs from encodings.{g}.set={encodings[g].set!r} in more than the "
                     f"model shape; one encoding's rungs may differ only in {', '.join(RUNG_KEYS)}", e.set)  # fmt: skip
        if shape != default:
            r = rung.setdefault(shape, name)
            for k in RUNG_BUDGET:
                if e.set.get(k) != encodings[r].set.get(k):
                    raise At(f"encodings.{name}.set.{k}", f"differs from encodings.{r}.set.{k}="
                             f"{encodings[r].set.get(k)!r}; every encoding of one model shape (a rung) trains with "
                             "the same budget", e.set.get(k))  # fmt: skip
        if (enc, shape, s) in seen:
            raise At(f"encodings.{name}.seed", f"the same run as encodings.{seen[enc, shape, s]} (same pe, "
                     "pe_options, set and seed); give it another seed", s)  # fmt: skip
        seen[enc, shape, s] = name


TOP_KEYS = set(PipelineParams.model_fields)


def validate(raw: Any) -> PipelineParams:
    """``raw`` (params.yaml as parsed) as :class:`PipelineParams`; ``ParamsError`` names the first bad key."""
    try:
        return check(PipelineParams, raw, "params.yaml")
    except SettingsError as e:
        raise ParamsError(str(e)) from None


class _Files(Mapping):
    """The parameter files of one folder by name, read when asked for (for ``extends``)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def __getitem__(self, name: str) -> Any:
        path = self.folder / f"{name}.yaml"
        if not path.is_file():
            raise KeyError(name)
        return _read(path)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(p.stem for p in self.folder.glob("*.yaml")))

    def __len__(self) -> int:
        return len(list(iter(self)))


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        why = str(e).replace("\n", " ")
        raise ParamsError(f"{path}: cannot read the pipeline parameters ({why})") from None


def compose_file(path: Path | str) -> Any:
    """A parameter file as parsed, its ``extends`` chain (files of the same folder) merged in.
    params.yaml itself never extends: it is what DVC reads, so it holds every value."""
    path = Path(path)
    raw = _read(path)
    if path.name == "params.yaml" or not isinstance(raw, dict) or EXTENDS not in raw:
        return raw
    try:
        return compose(_Files(path.parent), path.stem, "parameter file")
    except SettingsError as e:
        raise ParamsError(f"{path}: {e}") from None


def load(path: Path | str = "params.yaml") -> tuple[dict[str, Any], PipelineParams]:
    """(the file as parsed and composed, its checked form); ``ParamsError`` (one line, naming the
    file) if unreadable or invalid."""
    path = Path(path)
    raw = compose_file(path)
    try:
        return raw, validate(raw)
    except ParamsError as e:  # the messages say "params.yaml ..."; name the file read
        msg = str(e)
        raise ParamsError(f"{path}{msg[len('params.yaml') :]}" if msg.startswith("params.yaml") else msg) from None


def render(path: Path | str) -> str:
    """The text params.yaml has when parameter file ``path`` is the active one: the file itself
    (comments and all) or, for a file that ``extends`` another, the composed values."""
    path = Path(path)
    raw = compose_file(path)
    extends = _read(path).get(EXTENDS) if isinstance(raw, dict) else None
    head = (f"# GENERATED by `python pipelines/use_profile.py {path.stem}` from params/{path.name}"
            f"{f' (which extends params/{extends}.yaml)' if extends else ''}:\n"
            "# edit that file and rerun use_profile.py, not this one (a test checks that they agree).\n")  # fmt: skip
    if not extends:
        return head + path.read_text(encoding="utf-8")
    return head + yaml.dump(raw, Dumper=_NoAliases, sort_keys=False, default_flow_style=None, allow_unicode=True,
                            width=120)  # fmt: skip


class _NoAliases(yaml.SafeDumper):
    """A file's anchors (cpu-claims' one ``set`` of a rung, ``&d32``) written out in full: params.yaml
    says every value where DVC and a reader look for it."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
