"""Find runs, the second step of a claim (schema -> matching -> stats, paired -> verdicts): peeval's numbers
read from the DuckDB store, the runs that are each variant's evidence (one unit per seed), and the metric a
claim resolves to (``ppl@{max}`` -> a length); :func:`find_runs` does all three for every claim.

The store is only read here (ingest owns it); published runs of other machines are left out.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from peeval import records
from peeval.tasks.family import families

from .schema import Claim, ClaimsError, Variant, option_defaults


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
    """peeval's numbers as (run_id, task) -> {metric: (value, stderr, n)}, plus the runs, and (read
    on demand from ``con`` by :meth:`outcomes`, for the paired tests of ``paired``) the per-example
    0/1 outcomes of a run."""

    runs: dict[str, dict]
    values: dict[tuple[str, str], dict[str, tuple[float, float | None, int | None]]]
    #: (run_id, task) -> [(doc_id, md5 of prompt + target, correct)]: read ones, or given by a caller
    samples: dict[tuple[str, str], list[tuple[int, str, bool]]] = field(default_factory=dict)
    #: the store's connection when it has a samples table (None: only ``samples`` as given)
    con: Any = field(default=None, repr=False)
    #: (run_id, task) -> the (source, location) of each dataset it read (task_data; none: not recorded)
    data: dict[tuple[str, str], frozenset] = field(default_factory=dict)
    #: checkpoint -> [(step, validation loss, in-distribution exact match or None)] in step order
    #: (training_curves; the accuracy from curves that record it): whether a run had converged (``convergence``)
    curves: dict[str, list[tuple]] = field(default_factory=dict)
    #: the runs.source judged (``local``: this pipeline's; ``published/<profile>``)
    source: str = records.LOCAL_SOURCE
    #: the runs of step-0 control checkpoints (issue 67; ``controls``): never a seed of their encoding
    controls: dict[str, dict] = field(default_factory=dict)

    def data_of(self, run_id: str, tasks: list[str]) -> frozenset:
        """What a run read for ``tasks`` (those it ran): runs of the same task on different data are
        different measurements, never one claim's two sides."""
        return frozenset().union(*(self.data.get((str(run_id), t), frozenset()) for t in tasks))

    def outcomes(self, run_id: str, task: str) -> list[tuple[int, str, bool]]:
        """The run's samples of ``task`` that have a 0/1 ``correct``, by doc_id; [] when none (or
        the run is not a local one). An example's identity is its doc_id and its text: two runs
        answered the same example only when both match (a hash keeps long prompts out of memory)."""
        key = (str(run_id), str(task))
        if key not in self.samples:
            rows = []
            if self.con is not None and key[0] in self.runs:
                q = (
                    "SELECT doc_id, md5(coalesce(prompt, '') || chr(31) || coalesce(target, '')), correct "
                    "FROM samples WHERE run_id = ? AND task = ? AND correct IS NOT NULL ORDER BY doc_id"
                )
                rows = [(int(d), str(h), bool(c)) for d, h, c in self.con.execute(q, list(key)).fetchall()]
            self.samples[key] = rows
        return self.samples[key]

    def scores(self, run_id: str, task: str) -> dict[int, tuple[str, dict]]:
        """The run's per-document metric values of ``task`` (samples.scores: SCROLLS' ROUGE per document), by
        doc_id with the hash of its prompt and target as :meth:`outcomes`; {} when none."""
        if self.con is None or str(run_id) not in self.runs:
            return {}
        q = ("SELECT doc_id, md5(coalesce(prompt, '') || chr(31) || coalesce(target, '')), scores FROM samples "
             "WHERE run_id = ? AND task = ? AND scores IS NOT NULL ORDER BY doc_id")  # fmt: skip
        try:
            rows = self.con.execute(q, [str(run_id), str(task)]).fetchall()
        except Exception:  # noqa: BLE001 - a store from before samples.scores (duckdb's BinderException)
            return {}
        return {int(d): (str(h), _json(v, f"samples.scores of run {run_id}")) for d, h, v in rows}

    def blocks(self, run_id: str, task: str, length: int) -> list[tuple[int, str, float, int]]:
        """The run's perplexity sums at ``length`` per document (ppl_blocks): (doc_id, what was scored:
        protocol, target run and token count, log-likelihood, tokens); [] when none. Two runs scored the same
        tokens of a document only when the second field matches (the targets protocol, same tokenizer)."""
        if self.con is None or str(run_id) not in self.runs:
            return []
        q = ("SELECT doc_id, protocol || ':' || coalesce(CAST(target_start AS VARCHAR), '') || '-' || "
             "coalesce(CAST(target_end AS VARCHAR), '') || ':' || CAST(tokens AS VARCHAR), ll, tokens "
             "FROM ppl_blocks WHERE run_id = ? AND task = ? AND length = ? ORDER BY doc_id")  # fmt: skip
        try:
            rows = self.con.execute(q, [str(run_id), str(task), int(length)]).fetchall()
        except Exception:  # noqa: BLE001 - a store without ppl_blocks (duckdb's CatalogException)
            return []
        return [(int(d), str(k), float(ll), int(n)) for d, k, ll, n in rows]


def read_store(con, source: str = records.LOCAL_SOURCE) -> Store:
    """The runs of one ``source`` (runs.source: ``local``, this pipeline's; ``published/<profile>`` on the board
    of a published profile, `make site`) and their numbers: the claims judge one source's runs, never two
    machines' runs mixed, nor a user's run beside a published profile's."""
    tables = _tables(con)
    runs: dict[str, dict] = {}
    if "runs" in tables:
        cur = con.execute("SELECT * FROM runs")
        cols = [d[0] for d in cur.description]
        for row in cur.fetchall():
            r = dict(zip(cols, row, strict=True))
            if r.get("source", records.LOCAL_SOURCE) != source:
                continue  # runs of other sources (profiles, machines, the user's) are shown, not judged with these
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
    # a step-0 control (its training summary says ``"control": "step0"``) is no seed of its encoding: kept apart
    controls = {rid: runs.pop(rid) for rid in [k for k, r in runs.items() if (r.get("summary") or {}).get("control")]}
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
    # ppl_by_length and passkey_cells are views of these same metrics rows; a diagnostic task's accuracies
    # (acc, read_acc, seq_acc) are also claimable as cells acc@all, acc@read_acc, acc@seq_acc
    if "diagnostic_cells" in tables:
        q = "SELECT run_id, task, split, cell, len_a, len_b, acc, n FROM diagnostic_cells"
        for run_id, task, split, cell, la, lb, acc, n in con.execute(q).fetchall():
            name = cell if cell else (records.addition_cell(la, lb) if la is not None and lb is not None else None)
            if name:
                put(run_id, records.diag_task(task, split), records.diag_cell_metric(name), acc, None, n)
    if "training_curves" in tables and runs:
        by_ckpt, curves = {}, {}
        cols = {d[0] for d in con.execute("SELECT * FROM training_curves LIMIT 0").description}
        em = "val_exact_match" if "val_exact_match" in cols else "NULL"  # a store written before the column
        q = f"SELECT checkpoint, step, val_loss, {em} FROM training_curves WHERE val_loss IS NOT NULL ORDER BY step"
        for ckpt, step, loss, acc in con.execute(q).fetchall():
            by_ckpt[str(ckpt)] = loss  # the last evaluated step wins
            curves.setdefault(str(ckpt), []).append((int(step), float(loss), None if acc is None else float(acc)))
        for run_id, r in (runs | controls).items():
            loss = by_ckpt.get(str(r.get("checkpoint")))
            if loss is not None:
                put(run_id, "train_val", "ppl", math.exp(min(float(loss), 700.0)), None, None)
    data: dict[tuple[str, str], frozenset] = {}
    if "task_data" in tables:
        for run_id, task, data_source, location in con.execute(
            "SELECT run_id, task, source, location FROM task_data"
        ).fetchall():
            key = (str(run_id), str(task))
            data[key] = data.get(key, frozenset()) | {(str(data_source), str(location))}
    store = Store(runs, values, con=con if "samples" in tables else None, data=data, source=source, controls=controls)
    if "training_curves" in tables and runs:
        store.curves = curves
    return store


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


def generator_default(r: dict, key: str):
    """What a diagnostic run's generator used for ``key`` when the run records no value: the default of its
    task at the run's generator size set (``settings.gen_profile`` of its training summary, else cpu; flip-flop's
    ``n_instr``: 32 at cpu, 256 at paper), else :data:`RUN_PARAM_DEFAULTS`."""
    s = r.get("summary") or {}
    task = s.get("task") or r.get("diag_task")
    prof = (s.get("settings") or {}).get("gen_profile") or "cpu"
    if task in records.DIAG_TASKS:
        from peeval.tasks.diagnostics.generators import params

        try:
            got = params(task, prof)
        except ValueError:
            got = {}
        if key in got:
            return got[key]
    return RUN_PARAM_DEFAULTS.get(key)


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
            got = generator_default(r, key)
        if (got not in value) if isinstance(value, list) else (got != value):  # a list: any of its values
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
    data: frozenset | None = None,
) -> list[list[str]]:
    """This variant's evidence, one unit per seed: the run ids (latest first) of the one
    checkpoint per seed whose latest run has one of ``tasks``. Several ``peeval eval`` runs of
    a checkpoint (one per task, say) form one unit; re-evaluations of a seed do not count twice.
    ``data``: only runs that read exactly that for ``tasks`` (:meth:`Store.data_of`)."""
    # diagnostic tasks read the small task-trained models, every other task (train_val included) the
    # pretrained ones: a pretraining claim must not average in a diagnostic model of the same encoding
    diag = tasks is not None and all(t.startswith(records.DIAG_PREFIX) for t in tasks)
    hits = []
    for r in store.runs.values():
        if r.get("size") is not None:  # a ladder rung: its own rows, the ladder chart's
            continue
        if run_params and not _run_params_match(r, run_params):
            continue
        if tasks is not None and not variant.method and (r.get("kind") == "diagnostic") != diag:
            continue
        if tasks is not None and not any((str(r["run_id"]), t) in store.values for t in tasks):
            continue
        if data is not None and tasks is not None and store.data_of(r["run_id"], tasks) != data:
            continue
        if variant.method:
            if r.get("kind") != "adapt" or run_method(r) != variant.method:
                continue
        else:
            if r.get("pe") != variant.pe or r.get("kind") == "adapt":
                continue
            norm = {**option_defaults(variant.pe), **r["pe_options"]}
            want = {**option_defaults(variant.pe), **variant.pe_options}
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
            for task in claim.leaves:
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


def _cell_length(metric: str) -> int | None:
    """The context length a metric of a family whose cells are lengths was measured at (perplexity ``ppl@L``,
    passkey ``acc@L@depth``: each family's ``cell_length``), else None."""
    for fam in families():
        if fam.cell_length is not None and (length := fam.cell_length(metric)) is not None:
            return length
    return None


def measured_length(claim: Claim, store: Store, metric: str | None, run_ids: list[str]) -> int | None:
    """The longest context a pair's number reads, for ``beyond_window`` claims: the length a ``{max}`` / ``{train}``
    metric resolved to (``ppl@2048``: 2048), else the longest length every run evaluated the claim's tasks at
    (passkey's ``acc`` averages its cells ``acc@L@depth``: the smallest of the runs' largest L). None: no run
    records a length."""
    pat = _pattern(claim.metric)
    if pat is not None and metric and (m := pat.match(metric)):
        return int(m.group(1))
    longest = []
    for rid in run_ids:
        lengths = [L for t in claim.leaves for name in store.values.get((rid, t), {}) if (L := _cell_length(name))]
        if lengths:
            longest.append(max(lengths))
    return min(longest) if longest else None


@dataclass
class Evidence:
    """A claim with its evidence in the store: per variant its runs (one unit of run ids per seed,
    :func:`matching_runs`), per variant compared with the focus the metric both sides have
    (:func:`resolve_metric`; None when a side has no runs or they share no length)."""

    claim: Claim
    units: dict[str, list[list[str]]]
    metrics: dict[str, str | None]


def claim_data(store: Store, focus_units: list[list[str]], tasks: list[str]) -> frozenset | None:
    """The data a claim is judged on: what the focus's latest run read for the claim's tasks (None: no focus
    run). Every side's runs must have read the same: a run on the mirror's stand-in for a dataset and a run
    on the dataset itself are never paired."""
    latest = [u[0] for u in focus_units if u]
    if not latest:
        return None
    run = max(latest, key=lambda rid: (str(store.runs[rid].get("date") or ""), rid))
    return store.data_of(run, tasks)


def find_runs(claims: list[Claim], store: Store) -> list[Evidence]:
    """Every claim's evidence (a run that varies an option some claim varies is an ablation, never a
    default run: the options are gathered over all claims first)."""
    ablations = ablation_keys(claims)
    out = []
    for c in claims:
        data = claim_data(store, matching_runs(store, c.variants[c.focus], ablations, c.run_params, c.leaves), c.leaves)
        units = {name: matching_runs(store, v, ablations, c.run_params, c.leaves, data)
                 for name, v in c.variants.items()}  # fmt: skip
        metrics = {
            name: resolve_metric(c, store, units[c.focus] + units[name]) if units[c.focus] and units[name] else None
            for name in c.others
        }
        out.append(Evidence(c, units, metrics))
    return out
