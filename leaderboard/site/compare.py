"""The compare page: any two runs, task by task (:mod:`leaderboard.compare`): the numbers are computed here and
embedded as JSON; the page's script (assets/compare.js) only looks them up for the two runs picked."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path

from leaderboard import compare, pages
from leaderboard.site.context import Page, SiteStore, fmt, jsonable

#: the compare page's script (looks up the numbers compare.py computed)
COMPARE_JS = Path(__file__).with_name("assets") / "compare.js"


def compare_data(store: SiteStore) -> dict:
    """Per pair of runs their paired tasks and perplexity blocks, each run's headline metrics, and the examples
    (prompt end, target) and responses where the two differ. Tasks are named by what they read: a hub run is
    never paired with a mirror run."""
    rows = store.view("compare_samples", order="run_id, task, doc_id")
    values = store.view("compare_metrics", order="run_id, task, metric")
    for r in [*rows, *values]:
        r["task"] = store.labels.get((r["run_id"], r["task"]), r["task"])
    outcomes: dict[str, dict[str, dict[int, tuple[str, bool]]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        outcomes[r["run_id"]][r["task"]][r["doc_id"]] = (f"{r['prompt']}\x00{r['target']}", bool(r["correct"]))
    pairs = compare.all_pairs(outcomes)
    shown: dict[str, set[int]] = defaultdict(set)
    for tasks in pairs.values():
        for p in tasks:
            shown[p.task].update(p.a_only, p.b_only)
    examples: dict[str, dict[int, list]] = defaultdict(dict)
    responses: dict[str, dict[str, dict[int, str]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        if r["doc_id"] in shown.get(r["task"], ()):
            examples[r["task"]][r["doc_id"]] = [(r["prompt"] or "")[-compare.CLIP :], r["target"]]
            responses[r["run_id"]][r["task"]][r["doc_id"]] = r["response"]
    by_run: dict[str, dict[str, dict[str, tuple]]] = defaultdict(lambda: defaultdict(dict))
    for m in values:
        by_run[m["run_id"]][m["task"]][m["metric"]] = (m["value"], m["stderr"])
    metrics = {rid: {t: {m: ms[m] for m in compare.headline(ms)} for t, ms in tasks.items()}
               for rid, tasks in by_run.items()}  # fmt: skip
    blocks: dict[str, dict[tuple[str, int], compare.Blocks]] = defaultdict(lambda: defaultdict(dict))
    for r in store.view("compare_blocks", order="run_id, task, length, doc_id"):
        task = store.labels.get((r["run_id"], r["task"]), r["task"])  # the corpus as read: never two corpora
        # the same target tokens are the same text only under one tokenizer: the bytes they cover say so (a smoke
        # run's 384-token vocabulary and tape @cpu's cover 1,304 vs 1,696 bytes at the same positions)
        scored = (r["protocol"], r["target_start"], r["target_end"], r["tokens"], r["bytes"])
        blocks[r["run_id"]][(task, r["length"])][r["doc_id"]] = (scored, r["ll"], r["tokens"])
    ppl_pairs = compare.all_ppl_pairs(blocks)
    return {"pairs": {k: [dataclasses.asdict(p) for p in v] for k, v in pairs.items()}, "metrics": metrics,
            "examples": examples, "responses": responses,
            "ppl_pairs": {k: [dataclasses.asdict(p) for p in v] for k, v in ppl_pairs.items()},
            "ppl_unpaired": compare.ppl_unpaired(blocks, ppl_pairs)}  # fmt: skip


def script_json(data) -> str:
    """``data`` as JSON safe inside ``<script type="application/json">``: every ``<``, ``>`` and ``&`` written as
    a \\u escape (JSON.parse reads them back), so no ``</script>`` or ``<!--`` in a task name or a sample's text
    ends the element or swallows the rest of the page."""
    text = json.dumps(data, default=jsonable, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(store: SiteStore) -> Page:
    runs = store.view("compare_runs", order="kind, name, seed, run_id")
    data = compare_data(store)
    text = script_json(data)
    paired_keys = list(data["pairs"]) or list(data["ppl_pairs"])
    first, second = (paired_keys[0].split("|") if paired_keys else [r["run_id"] for r in runs[:2]] + [None, None])[:2]
    labels = [{"run_id": r["run_id"], "label": f"{r['name']} · {r['kind']} · seed {fmt(r['seed'])} · {r['run_id']}"}
              for r in runs]  # fmt: skip
    store.files["assets/compare.js"] = COMPARE_JS.read_text(encoding="utf-8")
    html = pages.render("compare.html", title="compare two runs", prefix="", links=store.nav(),
                        runs=labels, first=first, second=second, data=pages.Markup(text))  # fmt: skip
    return Page("compare.html", "compare two runs", html)
