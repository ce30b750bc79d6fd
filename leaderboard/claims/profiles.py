"""Which pipeline profile measures a comparison: the parameter files (params/<name>.yaml, their ``extends`` chain
composed as ``pipelines/use_profile.py`` does) read for the runs and evaluations a claim's two variants need.

A comparison without a peeval number for one side is "not measured" in the store at hand; its row names the
first profile of :data:`ORDER` whose parameter file runs both variants on the claim's task (and whose training
profile is not one of the claim's ``unlearned_at``, where the numbers would carry no verdict), or "none" when no
parameter file does (a task peeval lacks, an ablation no profile trains). What counts as running a variant:

- a diagnostic task (``peeval_diag_<task>_<split>``): a ``diagnostics.runs`` entry with the variant's encoding,
  its options, that task, and the claim's ``run_params`` (in the entry or the diagnostics' ``train.set`` /
  ``task_set``; an absent ``n_vars`` counts as 1);
- an adapt method: in ``adapt.methods``, and every task of the claim in a suite of ``eval.adapt``; for a claim
  on an extension of the pipeline's own model (``run_params: {base: …}``): in ``extend.methods``, and every task
  in a suite of ``extend.eval`` (stage ``eval_extend``);
- a pretrained encoding: an ``encodings`` entry with that encoding and options, and every task in a suite of
  ``eval.pretrain`` (``train_val``: the training curve, always; ``peeval_shift_stability``: the entry named in
  ``shift.encodings``).

Reads YAML only (no torch, no pipeline import): the smoke profile is left out (CI's, its numbers decide nothing).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from peeval import records
from peeval.settings import EXTENDS, SettingsError, compose

from .schema import Claim, Variant, option_defaults

#: the profiles a "not measured" row may name, cheapest first
ORDER = ("cpu", "cpu-claims", "gpu", "paper")
PARAMS_DIR = Path(__file__).resolve().parent.parent.parent / "params"
#: the claim task -> the task the parameter files list (pipelines/pipeline_params.py MIRROR_TASKS)
MIRROR_TASKS = {"hellaswag": "peeval_hellaswag"}
#: generator parameters whose absence means this value (matching.RUN_PARAM_DEFAULTS)
RUN_PARAM_DEFAULTS = {"n_vars": 1}


@functools.cache
def parameter_files(folder: str = str(PARAMS_DIR)) -> dict[str, dict]:
    """The composed parameter files of :data:`ORDER` in ``folder`` that exist and parse ({} for none)."""
    raw: dict[str, Any] = {}
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            raw[path.stem] = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
    out = {}
    for name in ORDER:
        if isinstance(raw.get(name), dict):
            try:
                out[name] = compose(raw, name, "parameter file") if EXTENDS in raw[name] else raw[name]
            except SettingsError:
                continue
    return out


def _options_match(claim: Claim, variant: Variant, entry: dict) -> bool:
    """The entry trains the variant's encoding with its options: those the variant names and those another
    variant of the claim varies (an entry that changes one is an ablation), defaults filled in on both sides."""
    if entry.get("pe") != variant.pe:
        return False
    keys = set(variant.pe_options).union(*(v.pe_options for v in claim.variants.values() if v.pe == variant.pe))
    defaults = option_defaults(variant.pe) if variant.pe else {}
    have = {**defaults, **(entry.get("pe_options") or {})}
    want = {**defaults, **variant.pe_options}
    return all(have.get(k) == want.get(k) for k in keys)


def _suite_tasks(p: dict, names: list[str] | None) -> set[str]:
    """The tasks of the ``eval.suites`` named in ``names`` (e.g. ``eval.adapt``, ``extend.eval``)."""
    suites = (p.get("eval") or {}).get("suites") or {}
    return {t for s in names or [] for t in ((suites.get(s) or {}).get("tasks") or [])}


def _has_tasks(tasks: set[str], leaves: list[str]) -> bool:
    return all(t in tasks or MIRROR_TASKS.get(t) in tasks for t in leaves)


def _diag_runs(p: dict, claim: Claim, variant: Variant, name: str) -> bool:
    diag = p.get("diagnostics") or {}
    train = diag.get("train") or {}
    for entry in (diag.get("runs") or {}).values():
        if not isinstance(entry, dict) or entry.get("task") != name or not _options_match(claim, variant, entry):
            continue
        given = {**(train.get("set") or {}), **((train.get("task_set") or {}).get(name) or {}), **entry}
        given = {**given, **(given.get("task_params") or {})}  # the generator's parameters of this run
        gen = "paper" if str(p.get("profile")) == "paper" else "cpu"  # peeval/training/profiles.yaml gen_profile
        defaults = {**RUN_PARAM_DEFAULTS, **_generator_params(name, gen)}
        if all(given.get(k, defaults.get(k)) == v for k, v in claim.run_params.items()):
            return True
    return False


def _generator_params(task: str, gen: str) -> dict:
    from peeval.tasks.diagnostics.generators import params

    try:
        return params(task, gen)
    except ValueError:
        return {}


def runs_variant(p: dict, claim: Claim, variant: Variant) -> bool:
    """Whether the composed parameter file ``p`` produces ``variant``'s number for ``claim``."""
    leaves = claim.leaves
    diag = [records.split_diag_task(t) for t in leaves]
    if all(d is not None for d in diag):
        return all(_diag_runs(p, claim, variant, d[0]) for d in diag)
    ev = p.get("eval") or {}
    if variant.method:
        if "base" in claim.run_params:  # an extension of the pipeline's own model (stages extend, eval_extend)
            ext = p.get("extend") or {}
            methods, suites = ext.get("methods"), ext.get("eval")
        else:  # an adaptation of the packaged base (stages adapt, eval_adapt)
            methods, suites = (p.get("adapt") or {}).get("methods"), ev.get("adapt")
        return variant.method in (methods or []) and _has_tasks(_suite_tasks(p, suites), leaves)
    encodings = {k: e for k, e in (p.get("encodings") or {}).items() if isinstance(e, dict)}
    mine = [k for k, e in encodings.items() if _options_match(claim, variant, e)]
    if not mine:
        return False
    if leaves == ["train_val"]:
        return True
    if leaves == [records.SHIFT_TASK]:
        return any(k in ((p.get("shift") or {}).get("encodings") or []) for k in mine)
    return _has_tasks(_suite_tasks(p, ev.get("pretrain")), leaves)


def measured_in(claim: Claim, names: tuple[str, ...], folder: str = str(PARAMS_DIR)) -> str:
    """The first profile (:data:`ORDER`) whose parameter file runs every variant of ``names`` for ``claim``
    and gives it a verdict (its training profile not in ``unlearned_at``), or 'none'."""
    for prof, p in parameter_files(folder).items():
        if str(p.get("profile")) in claim.unlearned_at:
            continue
        if all(runs_variant(p, claim, claim.variants[n]) for n in names):
            return prof
    return "none"


def active_profile(params: str | Path = PARAMS_DIR.parent / "params.yaml", folder: str = str(PARAMS_DIR)) -> str | None:
    """The profile whose composed parameter file params.yaml is (pipelines/use_profile.py writes it), or None when
    params.yaml was edited by hand or is missing: then no pre-registered family applies."""
    import yaml

    try:
        mine = yaml.safe_load(Path(params).read_text())
    except (OSError, yaml.YAMLError):
        return None
    for name, p in parameter_files(folder).items():
        if p == mine:
            return name
    return None


def design_runs(p: dict, claim: Claim, variant: Variant) -> int:
    """How many independently trained runs (seeds) the parameter file ``p`` gives ``variant`` by design (0: none):
    a diagnostic claim's ``diagnostics.seeds``; a pretrained encoding's entries (one per seed; the shift stage's
    for TAPE table 8); an extension method one per ``extend.bases`` entry (one run per base seed); an adapter of
    the packaged base 1 (one run per method, whatever its seed)."""
    if not runs_variant(p, claim, variant):
        return 0
    if all(records.split_diag_task(t) is not None for t in claim.leaves):
        return len((p.get("diagnostics") or {}).get("seeds") or [0])
    if variant.method:
        if "base" in claim.run_params:  # stage extend: each method trained once on each base (issue 55)
            return len((p.get("extend") or {}).get("bases") or [])
        return 1
    encodings = {k: e for k, e in (p.get("encodings") or {}).items() if isinstance(e, dict)}
    mine = [k for k, e in encodings.items() if _options_match(claim, variant, e)]
    if claim.leaves == [records.SHIFT_TASK]:
        mine = [k for k in mine if k in ((p.get("shift") or {}).get("encodings") or [])]
    return len(mine)


def registered_family(claims: list[Claim], name: str, folder: str = str(PARAMS_DIR)) -> list[str]:
    """The pairs the rule of claims.yaml ``families`` declares testable for profile ``name``, from its parameter file
    alone (no store, no result): both sides run with >= decision.MIN_RUNS seeds by design, at a training profile
    not in the claim's ``unlearned_at``. claims.yaml writes the lists out; a test checks they follow this rule."""
    from .decision import MIN_RUNS

    p = parameter_files(folder).get(name)
    if p is None:
        return []
    out = []
    for c in claims:
        if str(p.get("profile")) in c.unlearned_at:
            continue
        for o in c.others:
            if all(design_runs(p, c, c.variants[v]) >= MIN_RUNS for v in (c.focus, o)):
                out.append(c.pair_id(o))
    return out
