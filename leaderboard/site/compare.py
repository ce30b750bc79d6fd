"""The compare page: any two runs, task by task (:mod:`leaderboard.site.compare_numbers`): the numbers are computed
here; the page's script (assets/compare.js) only looks them up for the two runs picked. Each run's metrics and the
examples are embedded; the rest (the pairs, the responses) is one script per run, ``compare/<run_id>.js``, loaded when
the run is picked (the page embedded 6.3 MB). A ``<script src>``, not ``fetch()``: Chromium refuses ``fetch`` from
file://, where the site is opened too. Each pair lives in the file of its first run id (the ``a|b`` key's ``a``),
written
once."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from pathlib import Path

from leaderboard.site import compare_numbers as compare
from leaderboard.site import compare_seeds, pages
from leaderboard.site.context import Page, SiteStore, fmt, jsonable
from leaderboard.site.responses import response_words

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
            responses[r["run_id"]][r["task"]][r["doc_id"]] = clip_response(response_words(r["response"]))
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


def run_labels(runs: list[dict], metrics: dict) -> list[dict]:
    """Each run's entry in the pickers, named by what was evaluated and on what: its row's name, its tasks, the
    checkpoint's folder and seed; a run id is added only where two entries would read alike (142 entries carried
    no task name, and two read identically)."""

    def text(r: dict) -> str:
        tasks = sorted(metrics.get(r["run_id"], {}))
        shown = ", ".join(tasks[:3]) + (f" +{len(tasks) - 3} more" if len(tasks) > 3 else "") if tasks else "no metrics"
        ckpt = str(r["checkpoint"] or "").rstrip("/").rsplit("/", 1)[-1] or "no checkpoint"
        return f"{r['name']} · {shown} · {ckpt} · seed {fmt(r['seed'])}"

    plain = {r["run_id"]: text(r) for r in runs}
    seen = Counter(plain.values())
    return [{"run_id": r["run_id"], "label": plain[r["run_id"]] + (f" · {r['run_id']}" if seen[plain[r["run_id"]]] > 1
             else "")} for r in runs]  # fmt: skip


def default_pair(data: dict, run_ids: list[str]) -> tuple[str | None, str | None]:
    """The pair the page opens on: the first paired one whose two runs differ (a perplexity ratio not 1, or an
    example one got right and the other wrong), never two runs that score the same everywhere."""

    def differs(key: str) -> bool:
        acc = any(p["a_only_count"] or p["b_only_count"] for p in data["pairs"].get(key, []))
        return acc or any(p["ratio"] is not None and p["ratio"] != 1 for p in data["ppl_pairs"].get(key, []))

    keys = [*data["pairs"], *(k for k in data["ppl_pairs"] if k not in data["pairs"])]
    chosen = next((k for k in keys if differs(k)), keys[0] if keys else None)
    if chosen is not None:
        a, b = chosen.split("|")
        return a, b
    return (run_ids + [None, None])[0], (run_ids + [None, None])[1]


#: what the page embeds (the board's rows and their seed-level comparisons: compare_seeds); the rest of
#: compare_data is in the runs' scripts (``split``)
EMBEDDED = ("metrics", "examples", "rows", "seeds")
#: the keys of compare_data held per pair (``a|b``), in the file of ``a``
PER_PAIR = ("pairs", "ppl_pairs", "ppl_unpaired")


def split(data: dict, run_ids: list[str]) -> tuple[dict, dict[str, dict]]:
    """``data`` as (what the page embeds, {run_id: what its script holds}): each pair once, in its first run's
    script, each run's responses in its own; every run picked has a script (an empty one at least)."""
    parts: dict[str, dict] = {rid: {k: {} for k in (*PER_PAIR, "responses")} for rid in run_ids}
    for kind in PER_PAIR:
        for key, value in (data.get(kind) or {}).items():
            rid = key.split("|", 1)[0]
            parts.setdefault(rid, {k: {} for k in (*PER_PAIR, "responses")})[kind][key] = value
    for rid, responses in (data.get("responses") or {}).items():
        parts.setdefault(rid, {k: {} for k in (*PER_PAIR, "responses")})["responses"] = responses
    return {k: data.get(k) or {} for k in EMBEDDED}, parts


def clip_response(text: str | None) -> str | None:
    """A response as the page shows it: its first ``compare.CLIP`` characters (the prompt shows its last as many;
    the run's page has both whole)."""
    if text is None or len(text) <= compare.CLIP:
        return text
    return text[: compare.CLIP] + "…"


#: significant digits of the numbers in the runs' scripts (the page prints 4)
DIGITS = 6


def rounded(value):
    """``value`` with every float to ``DIGITS`` significant digits (17 were written: a third of the bytes)."""
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


def run_script(run_id: str, part: dict) -> str:
    """``compare/<run_id>.js``: hands its part to the page (``peevalCompare`` in assets/compare.js)."""
    return f"peevalCompare({json.dumps(run_id)},{script_json(rounded(part))});\n"


def read_site(site: Path) -> dict:
    """compare_data as a built site holds it (the page's JSON and every run's script, merged back): for tests and
    anyone reading the numbers without a browser."""
    import re

    html = (site / "compare.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="compare-data">(.*?)</script>', html, re.S)[1])
    data.update({k: {} for k in (*PER_PAIR, "responses")})
    for path in sorted((site / "compare").glob("*.js")):
        m = re.fullmatch(r"peevalCompare\((\"[0-9a-f]+\"),(.*)\);\n", path.read_text(encoding="utf-8"), re.S)
        rid, part = json.loads(m[1]), json.loads(m[2])
        for kind in PER_PAIR:
            data[kind].update(part[kind])
        if part["responses"]:
            data["responses"][rid] = part["responses"]
    return data


def render(store: SiteStore) -> Page:
    runs = store.view("compare_runs", order="kind, name, seed, run_id")
    data = compare_data(store)
    data.update(compare_seeds.row_pairs(store))
    embedded, parts = split(data, [r["run_id"] for r in runs])
    text = script_json(embedded)
    for rid, part in parts.items():
        store.files[f"compare/{rid}.js"] = run_script(rid, part)
    opening = compare_seeds.tape_vs_rope(runs, data["rows"], data["ppl_pairs"])
    first, second = opening or default_pair(data, [r["run_id"] for r in runs])
    labels = run_labels(runs, data["metrics"])
    store.files["assets/compare.js"] = COMPARE_JS.read_text(encoding="utf-8")
    html = pages.render("compare.html", title="compare two runs", prefix="", links=store.nav(),
                        runs=labels, first=first, second=second, data=pages.Markup(text))  # fmt: skip
    return Page("compare.html", "compare two runs", html)
