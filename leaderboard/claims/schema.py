"""claims.yaml: its schema, loaded and validated against the names peeval can produce.

A claim's task and metric are checked against peeval's task YAMLs and declarations (read without
importing torch: ``peeval.registry.declarations``), not against the store: a claim whose runs were not made
in this profile is inconclusive later, a misspelt name is an error now (``ClaimsError``, naming the
file, the claim and the field).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import peeval
from peeval import records
from peeval.registry import PAPERS as _PAPERS
from peeval.registry import declarations
from peeval.tasks.family import families

#: the papers a claim may cite (claims.yaml ``paper``): ``peeval.registry.PAPERS``' short names
PAPERS = tuple(p.short for p in _PAPERS)
UNITS = ("acc_pct", "err_pct", "ppl", "nll", "score_pct", "pct", "attn_diff_e2")
ACC_UNITS = ("acc_pct", "err_pct")
CPU = ("testable", "partial", "no")
DEFAULT_PATH = Path(__file__).resolve().parent / "claims.yaml"

#: run_params an adapter claim may pin (keys of adapt_summary.json): the packaged base's file, or the
#: pipeline's own checkpoint an extension started from (params.yaml ``extend``)
ADAPT_RUN_PARAMS = ("gguf_file", "base")


class ClaimsError(ValueError):
    """A malformed claims file: the message names the file, the claim and the field."""


# --------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class Variant:
    name: str
    pe: str | None = None
    pe_options: dict = field(default_factory=dict)
    method: str | None = None
    paper: float | None = None
    paper_std: float | None = None

    def label(self) -> str:
        """The leaderboard's label of this variant (peeval.records: one format for ingest and claims)."""
        return records.adapt_label(self.method) if self.method else records.encoding_label(self.pe, self.pe_options)


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    ref: str
    title: str
    task: Any  # str, or a (nested) list = mean over tasks
    metric: str
    unit: str
    higher_is_better: bool
    focus: str
    variants: dict[str, Variant]
    setting: str
    cpu: str
    cpu_note: str
    claim: str = "better"
    tolerance: float | None = None
    note: str = ""
    run_params: dict = field(default_factory=dict)
    #: training profiles at whose budget the sizing sweep's baseline did not learn the task (README
    #: "Claims"): runs trained at one of them get numbers but no verdict, rather than a verdict on noise
    unlearned_at: list = field(default_factory=list)
    #: the paper's claim is about contexts beyond the model's trained / native window (context extension,
    #: extrapolation): a pair measured only inside the runs' ``training_length`` gets no verdict (``verdicts``)
    beyond_window: bool = False
    #: a diagnostic side "learned" its task when its in-distribution accuracy beats the majority answer by this
    #: (claims.yaml's top-level ``learned_margin``, one for every claim; ``learned``)
    learned_margin: float = 0.1
    #: a diagnostic run whose curve records only losses is still improving when its recent slope, extrapolated over
    #: ``converge_horizon`` of its steps, would lower its validation loss by more than this fraction of it
    #: (claims.yaml ``converge_tolerance``; ``convergence``)
    converge_tolerance: float = 0.05
    #: the share of a run's own steps its recent slope is extrapolated over: the trailing side blocks a pair only
    #: when that much more training could close or flip the gap (claims.yaml ``converge_horizon``; ``convergence``)
    converge_horizon: float = 0.25
    #: a text-pretrained language model learned when its final validation log perplexity is below its unigram
    #: log perplexity by this (nats; claims.yaml ``lm_learned_margin``; ``learned.lm_not_learned``)
    lm_learned_margin: float = 0.5
    #: an extension (``method`` variants of the pipeline's own model) whose perplexity at its new training length is
    #: not below the unextended base's by this (log ppl, nats) is "not learned" (claims.yaml ``extension_margin``)
    extension_margin: float = 0.05
    #: an equal claim's equivalence counts only when this pair (``claim-id:focus-vs-other``, the same measurement
    #: in the same store) is decided different: a positive control (issue 55); None: no TOST verdict
    positive_control: str | None = None
    #: the pre-registered Holm families: profile -> the pair ids declared testable there (claims.yaml ``families``)
    families: dict = field(default_factory=dict)

    def task_label(self) -> str:
        return _task_label(self.task)

    @property
    def leaves(self) -> list[str]:
        """The tasks whose numbers the claim reads (a nested list of tasks is their mean)."""
        return _leaf_tasks(self.task)

    def pair_id(self, other: str) -> str:
        """The id of the pair focus vs ``other`` (the claims table's claim_id, claims.yaml's families)."""
        return f"{self.id}:{self.focus}-vs-{other}"

    @property
    def others(self) -> list[str]:
        """The variants the focus is compared with, in the file's order."""
        return [name for name in self.variants if name != self.focus]

    def against(self, other: str) -> tuple[float | None, int, str]:
        """What the paper says of focus vs ``other``: (its difference focus − other, +1 if that favours the
        focus else −1, the comparison 'better' or 'equal': a claim: equal, or a tie in the paper's numbers)."""
        focus, them = self.variants[self.focus], self.variants[other]
        paper_diff = None
        if focus.paper is not None and them.paper is not None:
            paper_diff = round(focus.paper - them.paper, 9)  # 94.82 - 11.16 is 83.66, not 83.66000000000001
        sign = 1
        if self.claim == "better" and paper_diff not in (None, 0.0):
            sign = 1 if (paper_diff > 0) == self.higher_is_better else -1
        kind = "equal" if self.claim == "equal" or paper_diff == 0.0 else "better"
        return paper_diff, sign, kind


def _task_label(task) -> str:
    return task if isinstance(task, str) else "mean(" + ", ".join(_task_label(t) for t in task) + ")"


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_task(task, where) -> None:
    if isinstance(task, str):
        if not re.fullmatch(r"[A-Za-z0-9_]+", task):
            raise ClaimsError(f"{where}: field 'task': {task!r} is not a task name")
        return
    if not isinstance(task, list) or not task:
        raise ClaimsError(f"{where}: field 'task' must be a task name or a non-empty list of them")
    for t in task:
        _check_task(t, where)


# --------------------------------------------------------------------------- names
# A claim's task and metric are checked against what peeval can produce, not against the store:
# a claim whose runs were not made in this profile is inconclusive, a misspelt name is an error.
TASKS_DIR = Path(peeval.__file__).resolve().parent / "tasks"
#: tasks that are no task YAML: the final validation loss of training, the shift-stability stage
EXTRA_TASKS = ("train_val", records.SHIFT_TASK)
#: the prefix of a placeholder task for a claim peeval cannot test at all (cpu: "no")
PLACEHOLDER = "not_in_peeval_"


class _TagLoader(yaml.SafeLoader):
    """Reads lm-eval task YAMLs without executing their ``!function`` tags."""


_TagLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _task_yaml(path: Path):
    """A task YAML as lm-eval reads it: an ``include:`` file's keys under the file's own (top level only)."""
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_TagLoader)
    if isinstance(doc, dict) and isinstance(doc.get("include"), str):
        base = _task_yaml(path.parent / doc["include"])
        doc = {**(base if isinstance(base, dict) else {}), **{k: v for k, v in doc.items() if k != "include"}}
    return doc


@functools.cache
def peeval_task_registry() -> tuple[dict[str, dict], frozenset[str]]:
    """({task or group name: its YAML}, lm-eval built-in tasks that peeval's suites name)."""
    own: dict[str, dict] = {}
    members: set[str] = set()
    for path in sorted(TASKS_DIR.rglob("*.yaml")):
        doc = _task_yaml(path)
        if not isinstance(doc, dict):
            continue
        name = doc.get("group") if isinstance(doc.get("task"), list) else doc.get("task")
        if isinstance(name, str):
            own[name] = doc
        if isinstance(doc.get("task"), list):
            members.update(t for t in doc["task"] if isinstance(t, str))
    return own, frozenset(members - set(own))


@functools.cache
def lm_eval_task_names() -> frozenset[str]:
    """Every task, group and tag name in lm-eval's own index (slow: ~10 s; only asked about names
    that are not peeval's own nor in its suites)."""
    from lm_eval.tasks import TaskManager

    return frozenset(TaskManager().all_tasks)


def _lm_eval_metrics() -> set[str]:
    import lm_eval.api.metrics  # noqa: F401  (registers the metrics)
    from lm_eval.api.registry import METRIC_REGISTRY

    return set(METRIC_REGISTRY)


def _metric_problem(task: str, metric: str) -> str | None:
    """Why ``metric`` is not something ``task`` reports (``{max}``/``{train}`` stand for a length), or None."""
    m = re.sub(r"\{max\}|\{train\}", "0", metric)
    own, _ = peeval_task_registry()
    if task.startswith(PLACEHOLDER):
        return None
    if task == "train_val":
        allowed = "ppl (exp of the last validation loss)"
        ok = m == "ppl"
    elif (family := records.family_metric(task, m)) is not None:  # the metric names peeval.records formats
        allowed, ok = family
    elif task.startswith(records.SCROLLS_PREFIX) and "scrolls_task" in (own.get(task, {}).get("metadata") or {}):
        kind = declarations.scrolls_metric_kinds()[own[task]["metadata"]["scrolls_task"]]
        names = ["rouge1", "rouge2", "rougeL", "rouge_gm"] if kind == "rouge" else [kind]
        allowed = ", ".join(["scrolls_score", *names])
        ok = m in ("scrolls_score", *names)
    elif task in own and (own[task].get("metric_list") or own[task].get("aggregate_metric_list")):
        doc = own[task]
        names = [x.get("metric") for x in doc.get("metric_list") or doc.get("aggregate_metric_list")]
        allowed = ", ".join(str(n) for n in names)
        ok = m in names
    else:  # lm-eval's tasks (and peeval's own without a metric list): a metric lm-eval knows
        names = _lm_eval_metrics()
        allowed = "a metric lm-eval registers (" + ", ".join(sorted(names)) + ")"
        ok = m.split("@")[0] in names
    return None if ok else f"{task} reports {allowed}"


def _check_names(e: dict, where: str, pending: list[tuple[str, str]]) -> None:
    """The task(s), metric and run_params of claim ``e`` name things peeval has (ClaimsError if not)."""
    own, members = peeval_task_registry()
    known = set(own) | members | set(EXTRA_TASKS)
    for task in _leaf_tasks(e["task"]):
        if task.startswith(PLACEHOLDER):
            if e["cpu"] != "no":
                raise ClaimsError(f"{where}: field 'task': {task!r} is a placeholder for a task peeval does not "
                                  "have, allowed only with cpu: no")  # fmt: skip
            continue
        if task in known:
            problem = _metric_problem(task, e["metric"])
            if problem:
                raise ClaimsError(f"{where}: field 'metric': {e['metric']!r} is not a metric of this task ({problem})")
            continue
        if task.startswith("peeval_"):
            near = difflib.get_close_matches(task, sorted(known), n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else f" (peeval's tasks: {', '.join(sorted(own))})"
            raise ClaimsError(f"{where}: field 'task': {task!r} is not a peeval task{hint}")
        pending.append((where, task))
        problem = _metric_problem(task, e["metric"])
        if problem:
            raise ClaimsError(f"{where}: field 'metric': {e['metric']!r} is not a metric of this task ({problem})")
    leaves = _leaf_tasks(e["task"])
    diag = [own[t].get("metadata", {}).get("diag_task") for t in leaves if t.startswith(records.DIAG_PREFIX)]
    adapters = all(isinstance(v, dict) and v.get("method") for v in (e.get("variants") or {}).values())
    for key in e.get("run_params") or {}:
        if adapters and not diag:  # which base the adapters started from (their adapt_summary.json)
            if key not in ADAPT_RUN_PARAMS:
                raise ClaimsError(f"{where}: field 'run_params': {key!r} is not recorded by `peeval adapt` "
                                  f"(allowed for adapter claims: {', '.join(ADAPT_RUN_PARAMS)})")  # fmt: skip
            continue
        if not diag:
            raise ClaimsError(f"{where}: field 'run_params': only diagnostic and adapter claims take run_params, "
                              f"not {key!r}")  # fmt: skip
        from peeval.tasks.diagnostics.generators import params

        allowed = {k for d in diag for k in params(d)}
        if key not in allowed:
            raise ClaimsError(f"{where}: field 'run_params': {key!r} is not a parameter of the {', '.join(diag)} "
                              f"generator ({', '.join(sorted(allowed))})")  # fmt: skip


def _check_lm_eval_tasks(pending: list[tuple[str, str]]) -> None:
    """Names that are neither peeval's nor in its suites must be lm-eval tasks (one index for all)."""
    if not pending:
        return
    names = lm_eval_task_names()
    for where, task in pending:
        if task not in names:
            near = difflib.get_close_matches(task, sorted(names), n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise ClaimsError(f"{where}: field 'task': {task!r} is neither a peeval task nor an lm-eval task{hint}")


def validate(data: Any, source: str = "claims") -> list[Claim]:
    """Claims from parsed YAML, or ClaimsError naming ``source``, the claim id and the field."""
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ClaimsError(f"{source}: expected a mapping with a 'claims' list")
    out: list[Claim] = []
    seen: set[str] = set()
    required = ("id", "paper", "ref", "title", "task", "metric", "unit", "higher_is_better", "focus", "variants")
    required += ("setting", "cpu", "cpu_note")
    allowed = set(required) | {"claim", "tolerance", "note", "run_params", "unlearned_at", "beyond_window",
                               "positive_control"}  # fmt: skip
    pending: list[tuple[str, str]] = []  # (where, task) that only lm-eval's index can confirm
    margin = data.get("learned_margin", 0.1)
    if not (_num(margin) and 0 <= margin < 1):
        raise ClaimsError(f"{source}: field 'learned_margin' must be a number in [0, 1), not {margin!r}")
    knobs = {}
    for key, default in (("converge_tolerance", 0.05), ("extension_margin", 0.05), ("lm_learned_margin", 0.5)):
        v = data.get(key, default)
        if not (_num(v) and 0 < v < 10):
            raise ClaimsError(f"{source}: field {key!r} must be a number in (0, 10), not {v!r}")
        knobs[key] = float(v)
    horizon = data.get("converge_horizon", 0.25)
    if not (_num(horizon) and 0 < horizon <= 1):
        raise ClaimsError(f"{source}: field 'converge_horizon' must be a number in (0, 1], not {horizon!r}")
    knobs["converge_horizon"] = float(horizon)
    fams = data.get("families", {})
    if not isinstance(fams, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v) for k, v in fams.items()
    ):
        raise ClaimsError(f"{source}: field 'families' must map a profile name to a list of pair ids")
    holm_families = {k: frozenset(v) for k, v in fams.items()}
    for i, e in enumerate(data["claims"]):
        cid = e.get("id") if isinstance(e, dict) else None
        where = f"{source}: claim {cid!r}" if cid else f"{source}: claim #{i + 1}"
        if not isinstance(e, dict):
            raise ClaimsError(f"{where}: must be a mapping")
        for f in required:
            if f not in e or e[f] is None:
                raise ClaimsError(f"{where}: missing field {f!r}")
        for f in e:
            if f not in allowed:
                near = difflib.get_close_matches(str(f), sorted(allowed), n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ClaimsError(f"{where}: unknown field {f!r}{hint} (allowed: {', '.join(sorted(allowed))})")
        if not isinstance(cid, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", cid):
            raise ClaimsError(f"{where}: field 'id' must match [a-z0-9-]+")
        if cid in seen:
            raise ClaimsError(f"{where}: field 'id' is duplicated")
        seen.add(cid)
        if e["paper"] not in PAPERS:
            raise ClaimsError(f"{where}: field 'paper' must be one of {', '.join(PAPERS)}, not {e['paper']!r}")
        for f in ("ref", "title", "metric", "setting", "cpu_note", "focus"):
            if not isinstance(e[f], str) or not e[f].strip():
                raise ClaimsError(f"{where}: field {f!r} must be a non-empty string")
        _check_task(e["task"], where)
        if e["unit"] not in UNITS:
            raise ClaimsError(f"{where}: field 'unit' must be one of {', '.join(UNITS)}, not {e['unit']!r}")
        if not isinstance(e["higher_is_better"], bool):
            raise ClaimsError(f"{where}: field 'higher_is_better' must be true or false")
        if e["cpu"] not in CPU:
            raise ClaimsError(f"{where}: field 'cpu' must be one of {', '.join(CPU)}, not {e['cpu']!r}")
        kind = e.get("claim", "better")
        if kind not in ("better", "equal"):
            raise ClaimsError(f"{where}: field 'claim' must be 'better' or 'equal', not {kind!r}")
        tol = e.get("tolerance")
        if kind == "equal" and not (_num(tol) and tol >= 0):
            raise ClaimsError(f"{where}: field 'tolerance' (a number >= 0) is required for claim: equal")
        if not isinstance(e.get("run_params", {}), dict):
            raise ClaimsError(f"{where}: field 'run_params' must be a mapping")
        unlearned = e.get("unlearned_at") or []
        if not isinstance(unlearned, list) or not all(isinstance(x, str) and x for x in unlearned):
            raise ClaimsError(f"{where}: field 'unlearned_at' must be a list of training profile names")
        beyond = e.get("beyond_window", False)
        if not isinstance(beyond, bool):
            raise ClaimsError(f"{where}: field 'beyond_window' must be true or false, not {beyond!r}")
        by_length = [f for f in families() if f.length_cells]  # families whose cells are context lengths
        if beyond and not all(any(f.owns(t) for f in by_length) for t in _leaf_tasks(e["task"])):
            raise ClaimsError(f"{where}: field 'beyond_window' needs a task measured by context length "
                              f"({', '.join(f.pattern for f in by_length)}), "
                              f"not {_task_label(e['task'])!r}")  # fmt: skip
        variants = _variants(e["variants"], where)
        _check_names(e, where, pending)
        if e["focus"] not in variants:
            raise ClaimsError(f"{where}: field 'focus' {e['focus']!r} is not one of the variants")
        if len(variants) < 2:
            raise ClaimsError(f"{where}: field 'variants' needs at least two encodings to compare")
        out.append(
            Claim(
                **{f: e[f] for f in required if f != "variants"},  # checked above, taken as written
                variants=variants,
                claim=kind,
                tolerance=float(tol) if tol is not None else None,
                note=str(e.get("note", "")),
                run_params=dict(e.get("run_params") or {}),
                unlearned_at=list(unlearned),
                beyond_window=beyond,
                learned_margin=float(margin),
                positive_control=e.get("positive_control"),
                families=holm_families,
                **knobs,
            )
        )
    _check_lm_eval_tasks(pending)
    pairs = {c.pair_id(o) for c in out for o in c.others}
    for prof, ids in holm_families.items():
        if unknown := sorted(ids - pairs):
            raise ClaimsError(
                f"{source}: families.{prof}: no such pair {unknown[0]!r} (a pair is 'claim-id:focus-vs-other')"
            )
    for c in out:
        if c.positive_control is not None and c.positive_control not in pairs:
            raise ClaimsError(f"{source}: claim {c.id!r}: field 'positive_control' {c.positive_control!r} is no pair "
                              "of this file ('claim-id:focus-vs-other')")  # fmt: skip
    return out


def _variants(raw, where) -> dict[str, Variant]:
    if not isinstance(raw, dict) or not raw:
        raise ClaimsError(f"{where}: field 'variants' must be a non-empty mapping")
    out = {}
    for name, v in raw.items():
        w = f"{where}: field 'variants.{name}'"
        if not isinstance(v, dict):
            raise ClaimsError(f"{w} must be a mapping")
        keys = {"pe", "pe_options", "method", "paper", "paper_std"}
        extra = sorted(set(map(str, v)) - keys)
        if extra:
            near = difflib.get_close_matches(extra[0], sorted(keys), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ClaimsError(f"{w}: unknown key(s) {', '.join(extra)}{hint}")
        if ("pe" in v) == ("method" in v):
            raise ClaimsError(f"{w} needs exactly one of 'pe' (a peeval encoding) or 'method' (a peeval adapt method)")
        if "pe" in v:
            encodings = declarations.encoding_names()
            if v["pe"] not in encodings:
                raise ClaimsError(f"{w}: pe {v['pe']!r} is not a peeval encoding ({', '.join(encodings)})")
        if "method" in v:
            methods = declarations.adapt_methods()
            if v["method"] not in methods:
                raise ClaimsError(f"{w}: method {v['method']!r} is not a peeval adapt method ({', '.join(methods)})")
        opts = v.get("pe_options") or {}
        if not isinstance(opts, dict):
            raise ClaimsError(f"{w}: pe_options must be a mapping")
        if opts and "method" in v:
            raise ClaimsError(f"{w}: pe_options belong to a 'pe' variant, not to an adapt method")
        if opts:
            known = option_defaults(v["pe"])
            unknown = sorted(set(map(str, opts)) - set(known))
            if unknown:
                raise ClaimsError(f"{w}: unknown pe_options {', '.join(unknown)} for {v['pe']} "
                                  f"(its options: {', '.join(sorted(known)) or 'none'})")  # fmt: skip
        if "paper" not in v:
            raise ClaimsError(f"{w}: missing key 'paper' (the paper's number, or null if only in a figure)")
        for k in ("paper", "paper_std"):
            if v.get(k) is not None and not _num(v[k]):
                raise ClaimsError(f"{w}: {k} must be a number or null, not {v[k]!r}")
        paper, std = v.get("paper"), v.get("paper_std")
        out[str(name)] = Variant(str(name), v.get("pe"), dict(opts), v.get("method"), paper, std)
    return out


def load_claims(path: str | Path = DEFAULT_PATH) -> list[Claim]:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ClaimsError(f"{path}: claims file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ClaimsError(f"{path}: cannot read the claims file ({e})") from None
    except yaml.YAMLError as e:
        raise ClaimsError(f"{path}: not valid YAML: {e}") from None
    return validate(data, str(path))


def option_defaults(pe: str) -> dict:
    """An encoding's options and their defaults (``pe`` is a validated encoding name), read from
    peeval's declarations without importing torch; an unreadable declaration raises, never {}."""
    return declarations.encoding_option_defaults(pe)


def _leaf_tasks(task) -> list[str]:
    return [task] if isinstance(task, str) else [t for x in task for t in _leaf_tasks(x)]
