"""The leaderboard's numbers: which metric of each task is a column, each name's runs per column, and the mean ±
stderr over seeds that the tables, the comparison with RoPE and the pipeline's metrics file show."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field

from leaderboard.site.context import SiteStore
from peeval.records import (
    DIAG_PREFIX,
    PASSKEY_TASK,
    SeedEstimate,
    headline_metrics,
    higher_is_better,
    is_cell,
    is_count,
    metric_kind,
    parse_ppl_metric,
    ppl_corpus,
    ppl_metric,
    seed_estimate,
)
from peeval.tasks.family import family_of


def column_tier(task: str) -> int:
    """What people compare first: perplexity (within, then beyond the training length), passkey,
    the papers' diagnostics, then zero-shot tasks (each family's ``tier``)."""
    fam = family_of(task)
    return 3 if fam is None else fam.tier


@dataclass
class Board:
    """The columns of runs of some kinds: ``labels`` (column labels), ``lower`` (lower is better, per column),
    ``cells`` (name -> label -> [(value, stderr, n, proportion, run_id, scored tokens)]), ``chosen`` (label ->
    its (task, metric)) and ``stats`` (name -> label -> the mean ± stderr over its runs)."""

    labels: list[str]
    lower: list[bool]
    cells: dict[str, dict[str, list[tuple]]]
    chosen: dict[str, tuple[str, str]]
    stats: dict[str, dict[str, SeedEstimate]] = field(default_factory=dict)


def board(store: SiteStore, kinds: tuple[str, ...], per_byte: bool = False) -> Board:
    """The columns of runs of ``kinds``: each task's headline metric (``peeval.records.headline_metrics``), its
    direction the registry's or, for a metric it does not know, lm-eval's (ingest: runs.params.higher_is_better).
    Perplexity: at the training length (else the shortest measured) and the longest. Each cell's estimate is the
    one the claims show too (``peeval.records.seed_estimate``)."""
    # seeds in run-id order: a cell's sums then do not depend on the order the runs were ingested in
    rows = store.view("metric_rows", "list_contains(?, kind)", [list(kinds)], order="name, task, metric, run_id")
    hidden: set[str] = set()  # members of a group with its own row (ingest: runs.params.subtasks)
    lm_eval: dict[tuple[str, str], bool] = {}  # lm-eval's direction of a metric the registry does not know
    protocol: dict[str, str | None] = {}  # run_id -> how it measured its perplexity
    for r in store.view("run_params", "list_contains(?, kind)", [list(kinds)]):
        params = json.loads(r["params"]) if r["params"] else {}
        protocol[r["run_id"]] = r["protocol"]
        hidden.update(params.get("subtasks") or [])
        for task, ms in (params.get("higher_is_better") or {}).items():
            lm_eval.update({(task, m): up for m, up in ms.items()})
    by_task: dict[tuple[str, str], set[str]] = defaultdict(set)  # (task, what it read) -> metrics
    by_protocol: dict[tuple[str, str], dict[str | None, set[int]]] = defaultdict(lambda: defaultdict(set))
    tokens: dict[tuple[str, str, int], int] = {}  # (run_id, task, L) -> scored tokens of ppl@L
    for r in rows:
        r["label"] = store.labels.get((r["run_id"], r["task"]), r["task"])
        pm = parse_ppl_metric(r["metric"])
        if r["task"] not in hidden:
            by_task[(r["task"], r["label"])].add(r["metric"])
            if pm and pm[0] == "ppl":
                by_protocol[(r["task"], r["label"])][protocol.get(r["run_id"])].add(pm[1])
        if pm and pm[0] == "tokens" and r["value"] is not None and math.isfinite(r["value"]):
            tokens[(r["run_id"], r["task"], pm[1])] = int(r["value"])
    train_len = store.training_length()
    chosen: list[tuple[str, str, str, str]] = []  # (task, what it read, metric, column label)
    for task, read in sorted(by_task, key=lambda k: (column_tier(k[0]), k)):
        ms = by_task[(task, read)]
        if ppl_corpus(task) is not None:  # named by the corpus read (peeval.records.task_label)
            # per protocol, its first (the training length, else its shortest) and longest length: rows measured
            # otherwise add their columns, never take a published row's away (issue 68 item 8); a learned table
            # has no cell past its rows, and adds no column
            shown = set()
            for lengths in map(sorted, by_protocol[(task, read)].values()):
                shown |= {train_len if train_len in lengths else lengths[0], lengths[-1]}
            for L in sorted(shown):
                chosen.append((task, read, ppl_metric("ppl", L), f"{read} {ppl_metric('ppl', L)}"))
            if per_byte:  # rows of several tokenizers: bits per byte, the number they share, beside each ppl
                chosen += [(task, read, ppl_metric("bpb", L), f"{read} {ppl_metric('bpb', L)}") for L in sorted(shown)
                           if ppl_metric("bpb", L) in ms]  # fmt: skip
        elif task.startswith(DIAG_PREFIX):  # every headline accuracy (flip-flop: read_acc, acc, seq_acc)
            chosen += [(task, read, m, f"{task[len(DIAG_PREFIX) :]} {m}") for m in headline_metrics(ms)]
        elif (fam := family_of(task)) is not None and fam.board is not None:  # a family that picks its columns
            chosen += [(task, read, m, f"{read} {m}") for m in fam.board(ms)]
        else:
            plain = [m for m in ms if not is_cell(m) and not is_count(m)]
            m = next(iter(headline_metrics(plain) or sorted(plain)), None)
            if m:
                chosen.append((task, read, m, "passkey acc" if task == PASSKEY_TASK else f"{read} {m}"))
    want = {(t, read, m): label for t, read, m, label in chosen}
    cells: dict[str, dict[str, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        label = want.get((r["task"], r["label"], r["metric"]))
        if label:
            proportion = metric_kind(r["task"], r["metric"]) == "fraction"
            pm = parse_ppl_metric(r["metric"])
            tok = tokens.get((r["run_id"], r["task"], pm[1])) if pm else None
            cells[r["name"]][label].append((r["value"], r["stderr"], r["n"], proportion, r["run_id"], tok))
    lower = [not higher_is_better(m, lm_eval.get((t, m))) for t, _, m, _ in chosen]
    out = Board([label for *_, label in chosen], lower, cells, {label: (t, m) for t, _, m, label in chosen})
    for name, by in cells.items():
        out.stats[name] = {}
        for label, vals in by.items():
            per_run = [(v[0], v[1], v[2]) for v in vals if v[0] is not None]
            if per_run:
                out.stats[name][label] = seed_estimate(per_run, proportion=vals[0][3])
    return out


def leaderboard_stats(con, kinds: tuple[str, ...]) -> tuple[list[str], dict[str, dict[str, SeedEstimate]], list[bool]]:
    """(column labels, name -> label -> mean ± stderr over its runs, lower-is-better flags) of the store ``con``
    (pipelines/build_site.py's metrics file: the leaderboard's own means)."""
    b = board(SiteStore(con), kinds)
    return b.labels, b.stats, b.lower


def run_claims(store: SiteStore) -> list[dict]:
    """The claims that rest on runs of this store, whatever their verdict (reproduced, contradicted,
    inconclusive, not decidable here), so a cell links to the verdict its runs got: id, task, metric, verdict,
    run ids."""
    out = []
    for c in store.view("claims_on_runs", order="claim_id"):
        ids = c["run_ids"]
        try:
            run_ids = set(json.loads(ids) if isinstance(ids, str) else ids or [])
        except ValueError:
            run_ids = set()
        out.append({"claim_id": c["claim_id"], "task": c["task"], "metric": c["metric"], "verdict": c["verdict"],
                    "run_ids": run_ids, "other": str(c["compared"] or "").rpartition(" vs ")[2]})  # fmt: skip
    return out


def cell_claims(b: Board, claims: list[dict], label: str, run_ids: set[str], against: str | None = None):
    """(claim_id, verdict) of the claims on this column's task and metric that used these runs
    (``against``: only the claims comparing with that encoding, e.g. rope in the table against RoPE)."""
    task, metric = b.chosen.get(label, (None, None))
    return [(c["claim_id"], c["verdict"]) for c in claims
            if c["task"] == task and c["metric"] == metric and c["run_ids"] & run_ids
            and (against is None or c["other"] == against)]  # fmt: skip
