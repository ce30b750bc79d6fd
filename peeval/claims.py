"""The papers' headline claims next to peeval's own numbers, with an honest verdict.

``leaderboard/claims.yaml`` lists each claim (paper, table, task, metric, compared encodings,
the paper's numbers and setting). This module validates that file, reads peeval's numbers
from the DuckDB store (runs, metrics, ppl_by_length, passkey_cells, diagnostic_cells,
training_curves) and gives every (focus, other) pair of a claim a verdict:

- ``reproduced``: peeval's difference has the paper's direction and exceeds ``Z`` (=2)
  combined standard errors;
- ``contradicted``: the opposite direction, beyond the same uncertainty;
- ``inconclusive``: otherwise, or when a number or its uncertainty is missing.

Uncertainty per encoding: the mean over seeds with the standard error across seeds when
there are >= 2 seeds, else the run's own stderr (lm-eval's), else for accuracies the
binomial (plus-four) stderr from n. An ``equal`` claim ("comparable") is reproduced when
|difference| + Z·se <= tolerance and contradicted when |difference| − Z·se > tolerance.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Z = 2.0
PAPERS = ("TAPE", "CoPE", "PoPE")
UNITS = ("acc_pct", "err_pct", "ppl", "nll", "score_pct", "pct", "attn_diff_e2")
ACC_UNITS = ("acc_pct", "err_pct")
CPU = ("testable", "partial", "no")
VERDICTS = ("reproduced", "contradicted", "inconclusive")
DEFAULT_PATH = Path(__file__).resolve().parent.parent / "leaderboard" / "claims.yaml"

CLAIMS_DDL = """CREATE TABLE IF NOT EXISTS claims (
    claim_id VARCHAR PRIMARY KEY, paper VARCHAR, ref VARCHAR, task VARCHAR, metric VARCHAR,
    compared VARCHAR, paper_value DOUBLE, peeval_value DOUBLE, stderr DOUBLE, n BIGINT,
    seeds INTEGER, verdict VARCHAR, setting_diff VARCHAR, run_ids VARCHAR)"""
CLAIM_VALUES_DDL = """CREATE TABLE IF NOT EXISTS claim_values (
    claim_id VARCHAR, variant VARCHAR, encoding VARCHAR, paper_value DOUBLE, paper_std DOUBLE,
    peeval_value DOUBLE, stderr DOUBLE, n BIGINT, seeds INTEGER, run_ids VARCHAR)"""
CLAIM_COLUMNS = ("claim_id", "paper", "ref", "task", "metric", "compared", "paper_value", "peeval_value", "stderr")
CLAIM_COLUMNS += ("n", "seeds", "verdict", "setting_diff", "run_ids")


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
        if self.method:
            return f"adapt:{self.method}"
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.pe_options.items()))
        return f"{self.pe}{{{opts}}}" if opts else str(self.pe)


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

    def task_label(self) -> str:
        return _task_label(self.task)


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
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
#: tasks that are no task YAML: the final validation loss of training, the shift-stability stage
EXTRA_TASKS = ("train_val", "peeval_shift_stability")
#: the prefix of a placeholder task for a claim peeval cannot test at all (cpu: "no")
PLACEHOLDER = "not_in_peeval_"


class _TagLoader(yaml.SafeLoader):
    """Reads lm-eval task YAMLs without executing their ``!function`` tags."""


_TagLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


@functools.cache
def peeval_task_registry() -> tuple[dict[str, dict], frozenset[str]]:
    """({task or group name: its YAML}, lm-eval built-in tasks that peeval's suites name)."""
    own: dict[str, dict] = {}
    members: set[str] = set()
    for path in sorted(TASKS_DIR.rglob("*.yaml")):
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_TagLoader)
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
    elif task == "peeval_shift_stability":
        from .shift_stability import SHIFTS

        allowed = f"attn_diff@<shift>@<layer> or pe_dot_diff@<shift>@<layer>, shift in {', '.join(SHIFTS)}"
        ok = re.fullmatch(rf"(attn_diff|pe_dot_diff)@({'|'.join(SHIFTS)})@\d+", m) is not None
    elif task.startswith("peeval_ppl_"):
        allowed = "ppl@L, bpb@L, tokens@L or windows@L (L a length, {max} or {train})"
        ok = re.fullmatch(r"(ppl|bpb|tokens|windows)@\d+", m) is not None
    elif task == "peeval_passkey":
        allowed = "acc or acc@<length>@<depth>"
        ok = re.fullmatch(r"acc(@\d+@(0|1)(\.\d+)?)?", m) is not None
    elif task.startswith("peeval_diag_"):
        diag = own.get(task, {}).get("metadata", {}).get("diag_task")
        extra = ["read_acc", "seq_acc"] if diag == "flip_flop" else []
        cells = ["all", *extra, *(["<a>x<b>"] if diag == "addition" else [])]
        allowed = ", ".join(["acc", *extra, *(f"acc@{c}" for c in cells)])
        cell = r"\d+x\d+" if diag == "addition" else "(?!)"
        ok = m in ("acc", *extra) or re.fullmatch(rf"acc@({'|'.join(['all', *extra])}|{cell})", m) is not None
    elif task.startswith("peeval_scrolls_") and task in own and "scrolls_task" in (own[task].get("metadata") or {}):
        from .tasks.scrolls.scrolls import TASKS

        kind = TASKS[own[task]["metadata"]["scrolls_task"]][0]
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
    diag = [own[t].get("metadata", {}).get("diag_task") for t in _leaf_tasks(e["task"]) if t.startswith("peeval_diag_")]
    for key in e.get("run_params") or {}:
        if not diag:
            raise ClaimsError(f"{where}: field 'run_params': only diagnostic claims take run_params, not {key!r}")
        from .tasks.diagnostics.generators import params

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
    allowed = set(required) | {"claim", "tolerance", "note", "run_params"}
    pending: list[tuple[str, str]] = []  # (where, task) that only lm-eval's index can confirm
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
                raise ClaimsError(f"{where}: unknown field {f!r} (allowed: {', '.join(sorted(allowed))})")
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
        variants = _variants(e["variants"], where)
        _check_names(e, where, pending)
        if e["focus"] not in variants:
            raise ClaimsError(f"{where}: field 'focus' {e['focus']!r} is not one of the variants")
        if len(variants) < 2:
            raise ClaimsError(f"{where}: field 'variants' needs at least two encodings to compare")
        out.append(
            Claim(
                id=cid,
                paper=e["paper"],
                ref=e["ref"],
                title=e["title"],
                task=e["task"],
                metric=e["metric"],
                unit=e["unit"],
                higher_is_better=e["higher_is_better"],
                focus=e["focus"],
                variants=variants,
                setting=e["setting"],
                cpu=e["cpu"],
                cpu_note=e["cpu_note"],
                claim=kind,
                tolerance=float(tol) if tol is not None else None,
                note=str(e.get("note", "")),
                run_params=dict(e.get("run_params") or {}),
            )
        )
    _check_lm_eval_tasks(pending)
    return out


def _variants(raw, where) -> dict[str, Variant]:
    if not isinstance(raw, dict) or not raw:
        raise ClaimsError(f"{where}: field 'variants' must be a non-empty mapping")
    out = {}
    for name, v in raw.items():
        w = f"{where}: field 'variants.{name}'"
        if not isinstance(v, dict):
            raise ClaimsError(f"{w} must be a mapping")
        extra = set(v) - {"pe", "pe_options", "method", "paper", "paper_std"}
        if extra:
            raise ClaimsError(f"{w}: unknown key(s) {', '.join(sorted(extra))}")
        if ("pe" in v) == ("method" in v):
            raise ClaimsError(f"{w} needs exactly one of 'pe' (a peeval encoding) or 'method' (a peeval adapt method)")
        if "pe" in v:
            from .models.encodings import ENCODINGS

            if v["pe"] not in ENCODINGS:
                raise ClaimsError(f"{w}: pe {v['pe']!r} is not a peeval encoding ({', '.join(ENCODINGS)})")
        if "method" in v:
            from .models.llama_adapters import METHODS

            if v["method"] not in METHODS:
                raise ClaimsError(f"{w}: method {v['method']!r} is not a peeval adapt method ({', '.join(METHODS)})")
        opts = v.get("pe_options") or {}
        if not isinstance(opts, dict):
            raise ClaimsError(f"{w}: pe_options must be a mapping")
        if opts and "method" in v:
            raise ClaimsError(f"{w}: pe_options belong to a 'pe' variant, not to an adapt method")
        if opts:
            known = _defaults(v["pe"])
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


# --------------------------------------------------------------------------- statistics
@dataclass
class Estimate:
    """One encoding's number in the paper's unit: mean over seeds, its stderr, total n."""

    value: float
    stderr: float | None
    n: int | None
    seeds: int
    run_ids: list[str]


def to_unit(unit: str, value: float, stderr: float | None) -> tuple[float, float | None]:
    """peeval's raw metric (accuracies in [0, 1]) converted to the paper's unit."""
    if unit == "acc_pct":
        return 100.0 * value, None if stderr is None else 100.0 * stderr
    if unit == "err_pct":
        return 100.0 * (1.0 - value), None if stderr is None else 100.0 * stderr
    if unit == "attn_diff_e2":
        return 100.0 * value, None if stderr is None else 100.0 * stderr
    return value, stderr


def binomial_stderr(p: float, n: int) -> float:
    """Plus-four stderr of a proportion: never 0, so 0/n or n/n is not 'certain'."""
    pt = (p * n + 2.0) / (n + 4.0)
    return math.sqrt(pt * (1.0 - pt) / (n + 4.0))


def combine_seeds(per_seed: list[tuple[float, float | None, int | None]], acc_like: bool) -> Estimate | None:
    """Mean over seeds; stderr across seeds (>= 2 seeds) else the run's stderr, else binomial."""
    if not per_seed:
        return None
    vals = [v for v, _, _ in per_seed]
    ns = [n for _, _, n in per_seed]
    n_tot = sum(ns) if all(n is not None for n in ns) else None
    k = len(vals)
    mean = sum(vals) / k

    def own(v, se, n):
        if se is not None and se > 0:
            return se
        if acc_like and n:
            return binomial_stderr(min(max(v, 0.0), 1.0), int(n))
        return se

    if k >= 2:
        se = statistics.stdev(vals) / math.sqrt(k)
        if se == 0.0:  # identical seeds: fall back to the pooled within-run uncertainty
            owns = [own(*x) for x in per_seed]
            se = math.sqrt(sum(s * s for s in owns)) / k if all(s is not None for s in owns) else None
    else:
        se = own(*per_seed[0])
    return Estimate(mean, se, n_tot, k, [])


def verdict(
    diff: float | None,
    se: float | None,
    higher_is_better: bool,
    expected_sign: int = 1,
    kind: str = "better",
    tolerance: float | None = None,
    z: float = Z,
) -> str:
    """``diff`` = focus − other in the paper's unit; ``expected_sign`` = +1 if the paper says the
    focus is better, −1 if its own numbers show the other ahead."""
    if diff is None or se is None or not math.isfinite(diff) or not math.isfinite(se):
        return "inconclusive"
    adv = diff if higher_is_better else -diff
    if kind == "equal":
        tol = tolerance or 0.0
        if abs(adv) + z * se <= tol:
            return "reproduced"
        if abs(adv) - z * se > tol:
            return "contradicted"
        return "inconclusive"
    s = 1 if expected_sign >= 0 else -1
    if s * adv > z * se:
        return "reproduced"
    if s * adv < -z * se:
        return "contradicted"
    return "inconclusive"


# --------------------------------------------------------------------------- the store
def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _json(v, where: str) -> dict:
    """A JSON-object column of the store; a corrupt one is an error naming the row, not {} (which
    would read a run's options as the defaults and file it under the wrong encoding)."""
    if v is None:
        return {}
    if isinstance(v, dict):
        return v
    try:
        out = json.loads(v)
    except (TypeError, ValueError) as e:
        raise ClaimsError(f"store: {where}: not valid JSON ({e}); re-run the ingest stage") from None
    if not isinstance(out, dict):
        raise ClaimsError(f"store: {where}: expected a JSON object, got {type(out).__name__}; re-run the ingest stage")
    return out


@dataclass
class Store:
    """peeval's numbers as (run_id, task) -> {metric: (value, stderr, n)}, plus the runs."""

    runs: dict[str, dict]
    values: dict[tuple[str, str], dict[str, tuple[float, float | None, int | None]]]


def read_store(con) -> Store:
    tables = _tables(con)
    runs: dict[str, dict] = {}
    if "runs" in tables:
        cur = con.execute("SELECT * FROM runs")
        cols = [d[0] for d in cur.description]
        for row in cur.fetchall():
            r = dict(zip(cols, row, strict=True))
            if r.get("source", "local") != "local":
                continue  # published runs of other profiles and machines are shown, not judged with local ones
            r["pe_options"] = _json(r.get("pe_options"), f"runs.pe_options of run {r['run_id']}")
            r["params"] = _json(r.get("params"), f"runs.params of run {r['run_id']}")
            runs[str(r["run_id"])] = r
    if "efficiency" in tables and runs:
        cur = con.execute("SELECT * FROM efficiency")
        cols = [d[0] for d in cur.description]
        eff = {str(row[0]): dict(zip(cols, row, strict=True)) for row in cur.fetchall()}
        for r in runs.values():
            e = eff.get(str(r.get("checkpoint")))
            if e:
                r["summary"] = _json(e.get("summary"), f"efficiency.summary of checkpoint {r.get('checkpoint')}")
                r["efficiency"] = e
    values: dict[tuple[str, str], dict] = {}

    def put(run_id, task, metric, value, stderr, n):
        if value is None:
            return
        d = values.setdefault((str(run_id), str(task)), {})
        d.setdefault(str(metric), (float(value), None if stderr is None else float(stderr), n))

    if "metrics" in tables:
        q = "SELECT run_id, task, metric, value, stderr, n FROM metrics ORDER BY filter <> 'none', filter"
        for r in con.execute(q).fetchall():  # the 'none' filter first: it wins
            put(*r)
    if "ppl_by_length" in tables:
        q = "SELECT run_id, corpus, length, ppl, tokens FROM ppl_by_length"
        for run_id, corpus, length, ppl, tokens in con.execute(q).fetchall():
            put(run_id, f"peeval_ppl_{corpus}", f"ppl@{length}", ppl, None, tokens)
    if "passkey_cells" in tables:
        for run_id, length, depth, acc, n in con.execute(
            "SELECT run_id, length, depth, acc, n FROM passkey_cells"
        ).fetchall():
            put(run_id, "peeval_passkey", f"acc@{length}@{depth}", acc, None, n)
    if "diagnostic_cells" in tables:
        q = "SELECT run_id, task, split, cell, len_a, len_b, acc, n FROM diagnostic_cells"
        for run_id, task, split, cell, la, lb, acc, n in con.execute(q).fetchall():
            name = cell if cell else (f"{la}x{lb}" if la is not None and lb is not None else None)
            if name:
                put(run_id, f"peeval_diag_{task}_{split}", f"acc@{name}", acc, None, n)
    if "training_curves" in tables and runs:
        by_ckpt = {}
        q = "SELECT checkpoint, step, val_loss FROM training_curves WHERE val_loss IS NOT NULL ORDER BY step"
        for ckpt, _step, loss in con.execute(q).fetchall():
            by_ckpt[str(ckpt)] = loss  # the last evaluated step wins
        for run_id, r in runs.items():
            loss = by_ckpt.get(str(r.get("checkpoint")))
            if loss is not None:
                put(run_id, "train_val", "ppl", math.exp(min(float(loss), 700.0)), None, None)
    return Store(runs, values)


def _defaults(pe: str) -> dict:
    """An encoding's options and their defaults (``pe`` is a validated encoding name)."""
    from .models.encodings import get_encoding_class

    return {k: o.default for k, o in get_encoding_class(pe).options.items()}


def ablation_keys(claims: list[Claim]) -> dict[str, set[str]]:
    """Per pe, the options some claim varies: a run that changes one of them is an ablation."""
    keys: dict[str, set[str]] = {}
    for c in claims:
        for v in c.variants.values():
            if v.pe:
                keys.setdefault(v.pe, set()).update(v.pe_options)
    return keys


#: generator parameters whose absence from a run's record means this value
RUN_PARAM_DEFAULTS = {"n_vars": 1}


def _find_key(obj, key):
    """The first value of ``key`` anywhere in nested dicts/lists, or KeyError."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        raise KeyError(key)
    for child in children:
        try:
            return _find_key(child, key)
        except KeyError:
            continue
    raise KeyError(key)


def _run_params_match(r: dict, want: dict) -> bool:
    for key, value in want.items():
        try:
            got = _find_key([r["params"], r.get("summary") or {}], key)
        except KeyError:
            got = RUN_PARAM_DEFAULTS.get(key)
        if got != value:
            return False
    return True


def run_method(r: dict) -> str | None:
    """The adapt method of an adapt run (ingest stores adapt_summary under params.adapt)."""
    p = r["params"]
    adapt = p.get("adapt") if isinstance(p.get("adapt"), dict) else {}
    return p.get("method") or adapt.get("method") or r["pe_options"].get("method") or r.get("name")


def matching_runs(
    store: Store,
    variant: Variant,
    ablations: dict[str, set[str]],
    run_params: dict | None = None,
    tasks: list[str] | None = None,
) -> list[list[str]]:
    """This variant's evidence, one unit per seed: the run ids (latest first) of the one
    checkpoint per seed whose latest run has one of ``tasks``. Several ``peeval eval`` runs of
    a checkpoint (one per task, say) form one unit; re-evaluations of a seed do not count twice."""
    # diagnostic tasks read the small task-trained models, every other task (train_val included) the
    # pretrained ones: a pretraining claim must not average in a diagnostic model of the same encoding
    diag = tasks is not None and all(t.startswith("peeval_diag_") for t in tasks)
    hits = []
    for r in store.runs.values():
        if run_params and not _run_params_match(r, run_params):
            continue
        if tasks is not None and not variant.method and (r.get("kind") == "diagnostic") != diag:
            continue
        if tasks is not None and not any((str(r["run_id"]), t) in store.values for t in tasks):
            continue
        if variant.method:
            if r.get("kind") != "adapt" or run_method(r) != variant.method:
                continue
        else:
            if r.get("pe") != variant.pe or r.get("kind") == "adapt":
                continue
            norm = {**_defaults(variant.pe), **r["pe_options"]}
            want = {**_defaults(variant.pe), **variant.pe_options}
            keys = set(variant.pe_options) | ablations.get(variant.pe, set())
            if any(norm.get(k) != want.get(k) for k in keys):
                continue
        hits.append(r)
    hits.sort(key=lambda r: (str(r.get("date") or ""), str(r["run_id"])), reverse=True)
    units: dict[Any, list[str]] = {}
    ckpt_of_seed: dict[Any, Any] = {}
    for r in hits:  # latest first: the latest run fixes each seed's checkpoint
        seed = r.get("seed")
        ckpt = r.get("checkpoint") or r["run_id"]
        if ckpt_of_seed.setdefault(seed, ckpt) == ckpt:
            units.setdefault(seed, []).append(str(r["run_id"]))
    return [units[s] for s in sorted(units, key=lambda s: (s is None, s if s is not None else 0))]


def _leaf_tasks(task) -> list[str]:
    return [task] if isinstance(task, str) else [t for x in task for t in _leaf_tasks(x)]


def _pattern(metric: str) -> re.Pattern | None:
    if "{" not in metric:
        return None
    parts = re.split(r"(\{max\}|\{train\})", metric)
    rx = "".join(r"(\d+)" if p in ("{max}", "{train}") else re.escape(p) for p in parts)
    return re.compile(rf"^{rx}$")


def resolve_metric(claim: Claim, store: Store, units: list[list[str]]) -> str | None:
    """``ppl@{max}`` -> the largest value that every unit has; ``{train}``: <= training length."""
    pat = _pattern(claim.metric)
    if pat is None:
        return claim.metric
    common: set[int] | None = None
    for unit in units:
        have: set[int] = set()
        for run_id in unit:
            for task in _leaf_tasks(claim.task):
                for m in store.values.get((run_id, task), {}):
                    mm = pat.match(m)
                    if mm:
                        have.add(int(mm.group(1)))
        if "{train}" in claim.metric:
            tl = store.runs[unit[0]].get("training_length")
            have = {x for x in have if tl is None or x <= int(tl)}
        common = have if common is None else common & have
    if not common:
        return None
    return re.sub(r"\{max\}|\{train\}", str(max(common)), claim.metric, count=1)


def run_value(store: Store, unit: list[str], task, metric: str) -> tuple[float, float | None, int | None] | None:
    """One checkpoint's raw metric (from its latest run that has it); a list of tasks is the
    mean (stderr combined as independent)."""
    if isinstance(task, str):
        for run_id in unit:
            got = store.values.get((run_id, task), {}).get(metric)
            if got is not None:
                return got
        return None
    parts = [run_value(store, unit, t, metric) for t in task]
    if any(p is None for p in parts):
        return None
    k = len(parts)
    mean = sum(p[0] for p in parts) / k
    ses = [p[1] for p in parts]
    se = math.sqrt(sum(s * s for s in ses)) / k if all(s is not None for s in ses) else None
    ns = [p[2] for p in parts]
    return mean, se, (sum(ns) if all(n is not None for n in ns) else None)


def estimate(claim: Claim, store: Store, units: list[list[str]], metric: str) -> Estimate | None:
    per_seed, used = [], []
    acc_like = claim.unit in ACC_UNITS
    leaves = _leaf_tasks(claim.task)
    for unit in units:
        raw = run_value(store, unit, claim.task, metric)
        if raw is None:
            continue
        v, se, n = raw
        if se is None and acc_like and n and isinstance(claim.task, str):
            se = binomial_stderr(min(max(v, 0.0), 1.0), int(n))
        per_seed.append((v, se, n))
        used += [rid for rid in unit if any((rid, t) in store.values for t in leaves)]
    est = combine_seeds(per_seed, acc_like)
    if est is None:
        return None
    est.value, est.stderr = to_unit(claim.unit, est.value, est.stderr)
    est.run_ids = used
    return est


# --------------------------------------------------------------------------- evaluation


def _setting_summary(store: Store, run_ids: list[str]) -> str:
    bits = []
    for rid in run_ids[:1]:
        r = store.runs[rid]
        p = {**(r.get("summary") or {}), **(r.get("efficiency") or {})}
        if p.get("params") is None and isinstance(r["params"].get("train"), int):
            p["params"] = r["params"]["train"]
        for key, label in (("params", "params"), ("steps", "steps"), ("tokens", "tokens")):
            if isinstance(p.get(key), (int, float)):
                bits.append(f"{label}={p[key]:,}")
        if r.get("training_length"):
            bits.append(f"ctx={r['training_length']}")
        if r["pe_options"]:
            bits.append("options=" + json.dumps(r["pe_options"], sort_keys=True))
    return " ".join(bits)


def evaluate_claims(claims: list[Claim], store: Store, z: float = Z) -> tuple[list[dict], list[dict]]:
    """Rows for the ``claims`` table (one per focus-vs-other pair) and ``claim_values``."""
    abl = ablation_keys(claims)
    rows, values = [], []
    for c in claims:
        leaves = _leaf_tasks(c.task)
        runs = {name: matching_runs(store, v, abl, c.run_params, leaves) for name, v in c.variants.items()}
        focus = c.variants[c.focus]
        ests: dict[str, Estimate | None] = {}
        metric_used: dict[str, str | None] = {}
        for name in c.variants:
            if name == c.focus:
                continue
            metric = resolve_metric(c, store, runs[c.focus] + runs[name]) if runs[c.focus] and runs[name] else None
            metric_used[name] = metric
            fe = estimate(c, store, runs[c.focus], metric) if metric else None
            oe = estimate(c, store, runs[name], metric) if metric else None
            ests.setdefault(c.focus, fe)
            ests[name] = oe
            other = c.variants[name]
            paper_diff = None
            if focus.paper is not None and other.paper is not None:
                paper_diff = round(focus.paper - other.paper, 9)  # 94.82 - 11.16 is 83.66, not 83.66000000000001
            sign = 1
            if c.claim == "better" and paper_diff not in (None, 0.0):
                sign = 1 if (paper_diff > 0) == c.higher_is_better else -1
            kind = "equal" if c.claim == "equal" or paper_diff == 0.0 else "better"
            diff = se = None
            missing = []
            if fe is None:
                missing.append(f"no peeval number for {c.focus} ({focus.label()})")
            if oe is None:
                missing.append(f"no peeval number for {name} ({other.label()})")
            if fe is not None and oe is not None:
                diff = fe.value - oe.value
                if fe.stderr is not None and oe.stderr is not None:
                    se = math.sqrt(fe.stderr**2 + oe.stderr**2)
                else:
                    missing.append("no uncertainty (one seed and no stderr): run >= 2 seeds")
            v = verdict(diff, se, c.higher_is_better, sign, kind, c.tolerance, z)
            seeds = min(fe.seeds, oe.seeds) if fe and oe else (fe or oe).seeds if (fe or oe) else 0
            n = (fe.n or 0) + (oe.n or 0) if fe and oe and fe.n is not None and oe.n is not None else None
            peeval_side = _setting_summary(store, (fe.run_ids if fe else []) or [r for u in runs[c.focus] for r in u])
            setting = f"paper: {c.setting} | peeval: {peeval_side or 'no runs'}; {seeds} seed(s)"
            setting += f" | CPU profile: {c.cpu} ({c.cpu_note})"
            if missing:
                setting += " | " + "; ".join(missing)
            used = sorted(set((fe.run_ids if fe else []) + (oe.run_ids if oe else [])))
            rows.append(
                dict(
                    claim_id=f"{c.id}:{c.focus}-vs-{name}",
                    paper=c.paper,
                    ref=c.ref,
                    task=c.task_label(),
                    metric=metric or c.metric,
                    compared=f"{c.focus} vs {name}",
                    paper_value=paper_diff,
                    peeval_value=diff,
                    stderr=se,
                    n=n,
                    seeds=seeds,
                    verdict=v,
                    setting_diff=setting,
                    run_ids=json.dumps(used),
                )
            )
        for name, var in c.variants.items():
            e = ests.get(name)
            values.append(
                dict(
                    claim_id=c.id,
                    variant=name,
                    encoding=var.label(),
                    paper_value=var.paper,
                    paper_std=var.paper_std,
                    peeval_value=e.value if e else None,
                    stderr=e.stderr if e else None,
                    n=e.n if e else None,
                    seeds=e.seeds if e else 0,
                    run_ids=json.dumps(e.run_ids if e else []),
                )
            )
    return rows, values


def write_claims(con, rows: list[dict], values: list[dict]) -> None:
    """Replace the ``claims`` and ``claim_values`` tables in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(CLAIMS_DDL)
        con.execute(CLAIM_VALUES_DDL)
        con.execute("DELETE FROM claims")
        con.execute("DELETE FROM claim_values")
        if rows:
            cols = CLAIM_COLUMNS
            con.executemany(
                f"INSERT INTO claims ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [[r[k] for k in cols] for r in rows],
            )
        if values:
            cols = list(values[0])
            con.executemany(
                f"INSERT INTO claim_values ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [[r[k] for k in cols] for r in values],
            )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def compute_claims(con, claims_path: str | Path = DEFAULT_PATH, z: float = Z) -> list[dict]:
    """Validate the claims file, read the store, write ``claims``; returns the claim rows."""
    claims = load_claims(claims_path)
    rows, values = evaluate_claims(claims, read_store(con), z)
    write_claims(con, rows, values)
    return rows


def summary(rows: list[dict]) -> str:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    return ", ".join(f"{k}: {n}" for k, n in counts.items())


__all__ = [
    "Claim",
    "ClaimsError",
    "Estimate",
    "Variant",
    "binomial_stderr",
    "combine_seeds",
    "compute_claims",
    "evaluate_claims",
    "load_claims",
    "read_store",
    "to_unit",
    "validate",
    "verdict",
    "write_claims",
]
