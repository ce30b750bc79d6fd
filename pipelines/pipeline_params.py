"""The pipeline's parameter file (params.yaml, a copy of one of params/<name>.yaml) as typed, checked data.

Words: a *profile* is a training-size preset of ``peeval/training/profiles.py`` (smoke, cpu, gpu,
paper); params.yaml's ``profile`` key names one. The files params/<name>.yaml are *parameter
files*, one per profile (``pipelines/use_profile.py`` copies one to params.yaml). The
``diagnostics.eval.profile`` key is the diagnostic generators' size set (``gen_profile``: cpu|paper).

Every stage loads params.yaml through :func:`load` (``common.params()``), so a wrong key, type or
combination is one line naming the key (exit 2) before the stage writes anything. Torch-free: the
names it checks against are read from their owners (``peeval.declarations`` for encodings and
adapt methods, ``peeval.records`` for diagnostic tasks, ``peeval.training.profiles`` for profiles).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from peeval.declarations import adapt_methods, encoding_names
from peeval.records import DIAG_TASKS, GEN_PROFILES
from peeval.tasks.metadata_keys import check_requested
from peeval.training.profiles import TRAIN_PROFILES

#: lm-eval tasks that cannot run on the offline mirror -> the peeval task that runs the same prompts
#: (lm-eval's `hellaswag` builds its train split even at 0-shot; the mirror holds only validation)
MIRROR_TASKS = {"hellaswag": "peeval_hellaswag"}


class ParamsError(ValueError):
    """One line: the params.yaml key, its value and what is allowed."""


@dataclass(frozen=True)
class Encoding:
    pe: str
    pe_options: dict[str, Any]
    set: dict[str, Any]
    seed: int | None = None  # the pretraining seed of this entry (None: the top-level seed)


@dataclass(frozen=True)
class DiagRun:
    """One diagnostics.runs entry: an encoding trained on one diagnostic task (a model per seed)."""

    pe: str
    pe_options: dict[str, Any]
    task: str


@dataclass(frozen=True)
class Diagnostics:
    runs: dict[str, DiagRun]
    seeds: list[int]
    train_set: dict[str, Any]
    task_set: dict[str, dict[str, Any]]
    gen_profile: str  # params.yaml diagnostics.eval.profile
    n: int
    limit: int | None

    @property
    def tasks(self) -> list[str]:
        """The tasks of the runs, in order of first appearance."""
        return list(dict.fromkeys(r.task for r in self.runs.values()))


@dataclass(frozen=True)
class Suite:
    tasks: list[str]
    metadata: dict[str, Any]
    limit: int | None


@dataclass(frozen=True)
class PipelineParams:
    profile: str
    seed: int
    launcher: str
    data_root: str
    data_mirror: list[str]
    tokenizer_set: dict[str, Any]
    train_set: dict[str, Any]
    encodings: dict[str, Encoding]
    diagnostics: Diagnostics
    shift_encodings: list[str]
    shift_sequences: int
    shift_length: int
    adapt_methods: list[str]
    adapt_set: dict[str, Any]
    eval_pretrain: list[str]
    eval_adapt: list[str]
    eval_base: list[str]  # suites of the adapters' base as shipped (stage eval_base), a subset of eval_adapt
    suites: dict[str, Suite]


def _check_seed_entries(encodings: dict[str, Encoding], seed: int) -> None:
    """Entries of one encoding (same pe and pe_options) are its seeds: the leaderboard averages
    them in one cell, so they must share every setting and differ in seed."""
    first: dict[str, str] = {}  # (pe, pe_options) -> its first entry
    seen: dict[tuple[str, int], str] = {}  # ((pe, pe_options), seed) -> entry
    for name, e in encodings.items():
        key = json.dumps([e.pe, e.pe_options], sort_keys=True)
        s = seed if e.seed is None else e.seed
        f = first.setdefault(key, name)
        if encodings[f].set != e.set:
            raise ParamsError(
                f"params.yaml encodings.{name}.set={e.set!r}: differs from encodings.{f}.set={encodings[f].set!r}; "
                "entries with the same pe and pe_options are seeds of one leaderboard row and must share set"
            )
        if (key, s) in seen:
            raise ParamsError(
                f"params.yaml encodings.{name}.seed={s}: the same run as encodings.{seen[key, s]} (same pe, "
                "pe_options, set and seed); give it another seed"
            )
        seen[key, s] = name


#: a run's name is a folder name (checkpoints/diag/<name>-s<seed>) and a DVC stage-name part
_RUN_NAME = re.compile(r"[a-z0-9][a-z0-9_]*(-[a-z0-9_]+)*")


def _diag_runs(runs, known_pe: list[str]) -> dict[str, DiagRun]:
    if not runs.raw:
        raise ParamsError("params.yaml diagnostics.runs: empty; name at least one run ({<name>: {pe, task}})")
    out = {}
    for name in runs.raw or {}:
        if not isinstance(name, str) or not _RUN_NAME.fullmatch(name):
            raise ParamsError(
                f"params.yaml diagnostics.runs.{name}: a name of lower-case letters, digits, '_' and '-' "
                "(conventionally <encoding>-<task>)"
            )
        e = runs.sub(name)
        unknown = set(e.raw) - {"pe", "pe_options", "task"}
        if unknown:
            raise ParamsError(
                f"params.yaml diagnostics.runs.{name}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                "allowed pe, pe_options, task"
            )
        pe, task = e.str("pe"), e.str("task")
        if pe not in known_pe:
            raise ParamsError(f"params.yaml diagnostics.runs.{name}.pe={pe!r}: allowed {', '.join(known_pe)}")
        if task not in DIAG_TASKS:
            raise ParamsError(f"params.yaml diagnostics.runs.{name}.task={task!r}: allowed {', '.join(DIAG_TASKS)}")
        out[name] = DiagRun(pe, e.mapping("pe_options", optional=True), task)
    return out


class _Reader:
    """Typed access to a nested mapping; every error names the dotted key."""

    def __init__(self, raw: Any, key: str = ""):
        self.raw, self.key = raw, key

    def _name(self, k: str) -> str:
        return f"{self.key}.{k}" if self.key else k

    def sub(self, k: str, keys: set[str] | None = None) -> _Reader:
        v = self._get(k)
        if not isinstance(v, dict):
            raise ParamsError(f"params.yaml {self._name(k)}={v!r}: a mapping")
        r = _Reader(v, self._name(k))
        if keys is not None:
            r.exact(keys)
        return r

    def exact(self, keys: set[str]) -> None:
        have = set(self.raw)
        if have - keys:
            raise ParamsError(
                f"params.yaml {self.key or '<top level>'}: unknown key(s) {', '.join(sorted(map(str, have - keys)))}; "
                f"allowed {', '.join(sorted(keys))}"
            )
        if keys - have:
            raise ParamsError(
                f"params.yaml {self.key or '<top level>'}: missing key(s) {', '.join(sorted(keys - have))}"
            )

    def _get(self, k: str) -> Any:
        if k not in self.raw:
            raise ParamsError(f"params.yaml: missing key {self._name(k)}")
        return self.raw[k]

    def str(self, k: str) -> str:
        v = self._get(k)
        if not isinstance(v, str):
            raise ParamsError(f"params.yaml {self._name(k)}={v!r}: a string")
        return v

    def int(self, k: str, lo: int, none: bool = False) -> int | None:
        v = self._get(k)
        if v is None and none:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ParamsError(f"params.yaml {self._name(k)}={v!r}: an integer >= {lo}" + (" or null" if none else ""))
        return v

    def mapping(self, k: str, optional: bool = False) -> dict[str, Any]:
        """A mapping (``{}`` where ``optional`` and null or absent: the settings maps)."""
        v = self.raw.get(k) if optional else self._get(k)
        if v is None and optional:
            return {}
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v):
            raise ParamsError(f"params.yaml {self._name(k)}={v!r}: a mapping of names to values")
        return dict(v)

    def names(self, k: str, allowed=None, what: str = "", nonempty: bool = False) -> list[str]:
        """A list of distinct strings, each one of ``allowed`` (when given)."""
        v = self._get(k)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ParamsError(f"params.yaml {self._name(k)}={v!r}: a list of names")
        if nonempty and not v:
            raise ParamsError(f"params.yaml {self._name(k)}: empty; name at least one")
        if len(set(v)) != len(v):
            raise ParamsError(f"params.yaml {self._name(k)}={v!r}: names repeat")
        if allowed is not None:
            bad = [x for x in v if x not in allowed]
            if bad:
                raise ParamsError(
                    f"params.yaml {self._name(k)}: unknown {', '.join(map(repr, bad))}; "
                    f"allowed {what}{', '.join(map(str, allowed)) or '(none)'}"
                )
        return list(v)


TOP_KEYS = {
    "profile",
    "seed",
    "launcher",
    "data",
    "tokenizer",
    "train",
    "encodings",
    "diagnostics",
    "shift",
    "adapt",
    "eval",
}


def validate(raw: Any) -> PipelineParams:
    """``raw`` (params.yaml as parsed) as :class:`PipelineParams`; ``ParamsError`` names the first bad key."""
    if not isinstance(raw, dict):
        raise ParamsError(f"params.yaml: a mapping of {', '.join(sorted(TOP_KEYS))} (got {type(raw).__name__})")
    r = _Reader(raw)
    r.exact(TOP_KEYS)
    profile = r.str("profile")
    if profile not in TRAIN_PROFILES:
        raise ParamsError(
            f"params.yaml profile={profile!r}: allowed {', '.join(TRAIN_PROFILES)} (peeval/training/profiles.py)"
        )
    seed = r.int("seed", 0)
    launcher = raw["launcher"] if raw["launcher"] is not None else ""
    if not isinstance(launcher, str):
        raise ParamsError(f"params.yaml launcher={launcher!r}: a string ('' for one process)")
    data = r.sub("data", {"root", "mirror"})
    tokenizer_set = r.sub("tokenizer", {"set"}).mapping("set", optional=True)
    train_set = r.sub("train", {"set"}).mapping("set", optional=True)

    encs = r.sub("encodings")
    if not encs.raw:
        raise ParamsError("params.yaml encodings: empty; name at least one encoding")
    known_pe = encoding_names()
    encodings = {}
    for name in encs.raw:
        e = encs.sub(name)
        unknown = set(e.raw) - {"pe", "pe_options", "set", "seed"}
        if unknown:
            raise ParamsError(
                f"params.yaml encodings.{name}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                "allowed pe, pe_options, set, seed"
            )
        pe = e.str("pe")
        if pe not in known_pe:
            raise ParamsError(f"params.yaml encodings.{name}.pe={pe!r}: allowed {', '.join(known_pe)}")
        encodings[name] = Encoding(pe, e.mapping("pe_options", optional=True), e.mapping("set", optional=True),
                                   e.int("seed", 0) if "seed" in e.raw else None)  # fmt: skip
    _check_seed_entries(encodings, seed)

    d = r.sub("diagnostics", {"runs", "seeds", "train", "eval"})
    runs = _diag_runs(d.sub("runs"), known_pe)
    seeds = d._get("seeds")
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise ParamsError(f"params.yaml diagnostics.seeds={seeds!r}: a non-empty list of distinct integers >= 0")
    dt = d.sub("train")
    if set(dt.raw) - {"set", "task_set"}:
        dt.exact({"set", "task_set"})  # names the unknown key
    task_set = dt.mapping("task_set", optional=True)
    for task in task_set:
        if task not in DIAG_TASKS:  # a task no run trains is allowed: profiles share task_set (cpu / cpu-claims)
            raise ParamsError(
                f"params.yaml diagnostics.train.task_set.{task}: not a diagnostic task; allowed {', '.join(DIAG_TASKS)}"
            )
        dt.sub("task_set").mapping(task, optional=True)
    de = d.sub("eval", {"profile", "n", "limit"})
    gen = de.str("profile")
    if gen not in GEN_PROFILES:
        raise ParamsError(
            f"params.yaml diagnostics.eval.profile={gen!r}: generator sizes, allowed {', '.join(GEN_PROFILES)}"
        )
    diagnostics = Diagnostics(
        runs=runs,
        seeds=list(seeds),
        train_set=dt.mapping("set", optional=True),
        task_set={k: dict(v or {}) for k, v in task_set.items()},
        gen_profile=gen,
        n=de.int("n", 1),
        limit=de.int("limit", 1, none=True),
    )

    s = r.sub("shift", {"encodings", "sequences", "length"})
    a = r.sub("adapt", {"methods", "train"})
    ev = r.sub("eval", {"pretrain", "adapt", "base", "suites"})
    sr = ev.sub("suites")
    suites = {}
    for name in sr.raw:
        su = sr.sub(name, {"tasks", "metadata", "limit"})
        suites[name] = Suite(
            su.names("tasks", nonempty=True), su.mapping("metadata", optional=True), su.int("limit", 1, none=True)
        )
        try:  # a misspelt key would be ignored and the task's default scored
            check_requested(suites[name].tasks, suites[name].metadata or {})
        except ValueError as e:
            raise ParamsError(f"params.yaml eval.suites.{name}.metadata{str(e).removeprefix('--metadata')}") from None
        for task, instead in MIRROR_TASKS.items():
            if task in suites[name].tasks:
                raise ParamsError(
                    f"params.yaml eval.suites.{name}.tasks: {task!r} needs a split the offline mirror lacks; "
                    f"use {instead!r} (same prompts and metrics)"
                )
    suite_names = list(suites)
    eval_adapt = ev.names("adapt", suite_names, "eval.suites keys: ")
    eval_base = ev.names("base", eval_adapt, "eval.adapt suites (the adapted rows it is read against): ")
    return PipelineParams(
        profile=profile,
        seed=seed,
        launcher=launcher,
        data_root=data.str("root"),
        data_mirror=data.names("mirror"),
        tokenizer_set=tokenizer_set,
        train_set=train_set,
        encodings=encodings,
        diagnostics=diagnostics,
        shift_encodings=s.names("encodings", list(encodings), "encodings.* keys: "),
        shift_sequences=s.int("sequences", 1),
        shift_length=s.int("length", 2),
        adapt_methods=a.names("methods", adapt_methods()),
        adapt_set=a.sub("train", {"set"}).mapping("set", optional=True),
        eval_pretrain=ev.names("pretrain", suite_names, "eval.suites keys: "),
        eval_adapt=eval_adapt,
        eval_base=eval_base,
        suites=suites,
    )


def load(path: Path | str = "params.yaml") -> tuple[dict[str, Any], PipelineParams]:
    """(the file as parsed, its checked form); ``ParamsError`` (one line, naming the file) if unreadable or invalid."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        why = str(e).replace("\n", " ")
        raise ParamsError(f"{path}: cannot read the pipeline parameters ({why})") from None
    try:
        return raw, validate(raw)
    except ParamsError as e:  # the messages say "params.yaml ..."; name the file read
        msg = str(e)
        raise ParamsError(f"{path}{msg[len('params.yaml') :]}" if msg.startswith("params.yaml") else msg) from None
