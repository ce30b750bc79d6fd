"""Build the static leaderboard site from the DuckDB store: plain HTML + inline SVG + one small
script (sorting, filtering), so ``leaderboard/site/index.html`` opens from file:// offline.

Pages: ``index.html`` (leaderboard/templates/index.html: the training length and budget (parameters, tokens per
parameter, seeds) in one line, the papers with the claims page's verdicts on each, each encoding against RoPE with
its interval or the reason there is none, a win or a loss only where the interval excludes parity, and the wins so
counted (``leaderboard/front.py``); then encodings x task groups, mean ± stderr over seeds with seeds and scored
tokens / examples beside each number; context extension; all runs), ``ppl.html``, ``passkey.html``,
``diagnostics.html``, ``training.html``, ``efficiency.html``, ``runs/<run_id>.html`` (provenance + metrics +
samples), ``claims.html``
(``leaderboard/claims_page.py``, from the claims stage's leaderboard/claims.duckdb when there is
one, else from the store's claims tables) when there is a claims table, and ``data/<table>.csv|json``
for every store table and every table shown. Every text from the store is HTML-escaped.

    python -m leaderboard.site --db leaderboard/peeval.duckdb [--claims-db leaderboard/claims.duckdb]
                               --out leaderboard/site
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from leaderboard import claims_page, compare, front, pages
from leaderboard._cli import run_command
from leaderboard.charts import heatmap, line_chart
from leaderboard.store import CLAIM_TABLES, TABLE_COLUMNS, StoreError, open_store
from peeval._io import replace_dir
from peeval.records import (
    DIAG_PREFIX,
    LOCAL_SOURCE,
    METRICS,
    NOT_RECORDED,
    PASSKEY_TASK,
    PPL_PREFIX,
    SeedEstimate,
    adapt_label,
    adapted_name,
    base_model_label,
    encoding_label,
    fmt_number,
    headline_metrics,
    higher_is_better,
    is_cell,
    is_count,
    metric_kind,
    parse_ppl_metric,
    ppl_corpus,
    ppl_metric,
    published_name,
    published_profile,
    published_source,
    seed_estimate,
    shipped_first,
    task_label,
)

DEFAULT_OUT = Path(__file__).with_name("site")
#: the compare page's script (looks up the numbers compare.py computed)
COMPARE_JS = Path(__file__).with_name("compare.js")
#: every table of the store and of the claims stage (read from its own database when the site has one)
STORE_TABLES = (*TABLE_COLUMNS, *CLAIM_TABLES)
SAMPLES_PER_TASK = 100
#: SQL of a metric's aggregation over seeds (peeval.records.MetricSpec.seeds)
SEED_SQL = {"mean": "avg", "sum": "sum"}

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1d3557;color:#fff;padding:10px 20px}header h1{margin:0;font-size:20px}
nav a{color:#cfe3ff;margin-right:14px;text-decoration:none}nav a:hover{text-decoration:underline}
main{padding:14px 20px;max-width:1400px}h2{margin-top:26px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;background:#fff;margin:6px 0 4px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef2f7;cursor:pointer;user-select:none;white-space:nowrap}
th.sorted-asc::after{content:" ▲"}th.sorted-desc::after{content:" ▼"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.se{color:#777;font-size:12px}
.tools{margin:6px 0}.tools input{padding:3px 6px;width:260px}.dl{font-size:12px;margin-left:10px}
.charts{display:flex;flex-wrap:wrap;gap:14px}svg.chart{background:#fff;border:1px solid #ddd}
svg .frame{fill:none;stroke:#999}svg .grid{stroke:#eee}svg .tick,svg .legend{font-size:11px;fill:#444}
svg .label{font-size:12px;fill:#222}svg .ctitle{font-size:13px;font-weight:600;fill:#222}
svg .line{stroke-width:2}svg .cell{font-size:10px}pre{background:#fff;border:1px solid #ddd;padding:8px;
white-space:pre-wrap;word-break:break-all;max-height:320px;overflow:auto;margin:0}.empty{color:#888}
.best{font-weight:700}.note{color:#555;font-size:13px}
.wide{overflow-x:auto;max-width:100%}table.sticky th:first-child,table.sticky td:first-child{position:sticky;left:0;
z-index:1;background:#fff}table.sticky th:first-child{background:#eef2f7}.lead{font-size:15px;margin:8px 0}
td .sub{display:block;color:#666;font-size:11px;white-space:normal;max-width:17em}
.win{color:#1a7f37}.lose{color:#b42318}td .outcome{display:block;font-size:11px}
.papers .paper{margin-right:14px}#vs-rope{margin-top:14px}
td .claim{display:block;font-size:10.5px;white-space:normal;max-width:11em}
table.sticky{font-size:13px}table.sticky th{white-space:normal;min-width:7em;max-width:11em;vertical-align:bottom}
table.sticky td{padding:2px 6px}table.sticky td:first-child{max-width:11em;overflow-wrap:anywhere}
table.sticky td .sub{max-width:11em;font-size:10.5px;line-height:1.25}#vs_rope th{font-size:12px}
#budget .note{font-size:12.5px}
nav{display:flex;flex-wrap:wrap;gap:2px 14px}nav a{margin-right:0}main{overflow-wrap:anywhere}
main table{display:block;overflow-x:auto;max-width:100%}.wide table{display:table}
svg.chart{max-width:100%;height:auto}.tools input{max-width:100%;box-sizing:border-box}select{max-width:100%}
@media (max-width:600px){main{padding:10px}header{padding:8px 10px}}
"""

JS = """
document.querySelectorAll('table.sortable').forEach(function (t) {
  t.querySelectorAll('th').forEach(function (th, i) {
    th.addEventListener('click', function () {
      var asc = !th.classList.contains('sorted-asc');
      t.querySelectorAll('th').forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(r) {
        var c = r.cells[i], s = c ? (c.getAttribute('data-sort') || c.textContent) : '';
        var f = parseFloat(s);
        return isNaN(f) || !/^\\s*[-+]?(\\d|\\.\\d|inf)/i.test(s) ? [1, s.toLowerCase()] : [0, f];
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x[0] !== y[0]) return x[0] - y[0];
        var d = x[0] ? String(x[1]).localeCompare(String(y[1]), undefined, {numeric: true})
                     : x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
        return asc ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.querySelectorAll('input.filter').forEach(function (inp) {
  inp.addEventListener('input', function () {
    var t = document.getElementById(inp.getAttribute('data-table')), q = inp.value.toLowerCase();
    Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
      r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
});
"""


def natural_key(text: str) -> tuple:
    """Sort key reading the numbers inside a text as numbers: acc@256 before acc@1024, ppl@512 before ppl@4096."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


def column_tier(task: str) -> int:
    """What people compare first: perplexity (within, then beyond the training length), passkey,
    the papers' diagnostics, then zero-shot tasks."""
    if task.startswith(PPL_PREFIX):
        return 0
    if task == PASSKEY_TASK:
        return 1
    if task.startswith(DIAG_PREFIX):
        return 2
    return 3


@dataclass
class Cell:
    """A table cell: shown text, the value sorting uses, an optional link and css class."""

    text: str
    sort: Any = None
    href: str | None = None
    cls: str = ""
    extra: str = ""  # already-escaped HTML appended (e.g. ± stderr)


def fmt(v: Any) -> str:
    """Every number the site prints (:func:`peeval.records.fmt_number`, 4 significant digits)."""
    return fmt_number(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


#: what a spreadsheet reads as the start of a formula (=, +, -, @, a tab or a carriage return: OWASP's list)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(v: Any) -> Any:
    """A value as the site's CSV downloads hold it: a text from the store that a spreadsheet would run as a
    formula (an lm-eval model named ``=HYPERLINK(...)``) gets a leading ``'``, so it is shown as the text it is;
    numbers (``-inf`` included) are written as they are."""
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return _jsonable(v)


class Site:
    """Collects pages and downloadable tables, then writes them in one go."""

    def __init__(self, con, out: Path, claims_con=None):
        """``claims_con``: the claims stage's database (tables claims, claim_values); default ``con``."""
        self.con, self.out = con, out
        self.claims_con = con if claims_con is None else claims_con
        self.files: dict[str, str] = {}
        self.labels = self.task_labels()
        self.claims_html = claims_page.render_claims_page(self.claims_con, self.labels)
        self.table_ids: set[str] = set()
        self.claims: list[dict] = []
        self.chosen: dict[str, tuple[str, str]] = {}
        self.cells: dict = {}

    def task_labels(self) -> dict[tuple[str, str], str]:
        """(run_id, task) -> what the site calls that task's numbers (``peeval.records.task_label``: a corpus by
        what was read, so a mirror run and a hub run of one task never share a column, chart or label); also
        registered as the relation ``task_labels`` (run_id, task, label) for the pages' queries."""
        import pyarrow as pa

        reads: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for r in self.q("select run_id, task, source, location from task_data"):
            reads[(r["run_id"], r["task"])].append((r["source"], r["location"]))
        pairs = self.q("select distinct run_id, task from metrics order by run_id, task")
        labels = {(r["run_id"], r["task"]): task_label(r["task"], reads.get((r["run_id"], r["task"]), []))
                  for r in pairs}  # fmt: skip
        self.con.register("task_labels", pa.table({"run_id": [k[0] for k in labels], "task": [k[1] for k in labels],
                                                   "label": list(labels.values())}))  # fmt: skip
        return labels

    # -- helpers
    def q(self, sql: str, params: list | None = None) -> list[dict]:
        cur = self.con.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def has_table(self, name: str) -> bool:
        return bool(self.q("select 1 from information_schema.tables where table_name = ?", [name]))

    def data_files(self, tid: str, headers: list[str], rows: list[list[Any]]) -> None:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\r\n")  # RFC 4180; and a text's lone \r is then quoted, never a row end
        w.writerow(headers)
        w.writerows([[csv_cell(v) for v in r] for r in rows])
        self.files[f"data/{tid}.csv"] = buf.getvalue()
        records = [{h: _jsonable(v) for h, v in zip(headers, r)} for r in rows]
        # one record per line: readable, and the C encoder (``indent`` takes Python's: 3x slower on 100k rows)
        self.files[f"data/{tid}.json"] = "[\n" + ",\n".join(json.dumps(r, default=str) for r in records) + "\n]\n"

    def table(
        self,
        tid: str,
        headers: list[str],
        rows: list[list[Any]],
        *,
        prefix: str = "",
        filt: bool = True,
        table_cls: str = "",
    ) -> str:
        """A sortable, filterable table plus its CSV / JSON downloads."""
        assert tid not in self.table_ids, tid
        self.table_ids.add(tid)
        plain = [[c.sort if isinstance(c, Cell) and c.sort is not None else (c.text if isinstance(c, Cell) else c)
                  for c in r] for r in rows]  # fmt: skip
        self.data_files(tid, headers, plain)
        tools = ('<div class="tools">' + (f'<input class="filter" data-table="{tid}" placeholder="filter rows…">'
                 if filt else "") + f'<a class="dl" href="{prefix}data/{tid}.csv" download>CSV</a>'
                 f'<a class="dl" href="{prefix}data/{tid}.json" download>JSON</a></div>')  # fmt: skip
        head = "".join(f"<th>{escape(h)}</th>" for h in headers)
        body = []
        for r in rows:
            tds = []
            for c in r:
                if not isinstance(c, Cell):
                    num = isinstance(c, (int, float)) and not isinstance(c, bool)
                    c = Cell(fmt(c), c if num else None, cls="num" if num else "")
                inner = escape(c.text)
                if c.href:
                    inner = f'<a href="{escape(c.href)}">{inner}</a>'
                sort = "" if c.sort is None else f' data-sort="{escape(str(_jsonable(c.sort)))}"'
                cls = f' class="{c.cls}"' if c.cls else ""
                tds.append(f"<td{cls}{sort}>{inner}{c.extra}</td>")
            body.append("<tr>" + "".join(tds) + "</tr>")
        tcls = f"sortable {table_cls}".strip()
        return (f'{tools}<table id="{tid}" class="{tcls}"><thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table>')  # fmt: skip

    def page(self, path: str, title: str, body: str) -> None:
        """A page of the site: ``body`` (HTML built here, its texts escaped) in the base template."""
        self.files[path] = pages.render("base.html", title=title, prefix="../" * path.count("/"),
                                        links=pages.nav(bool(self.claims_html)), body=pages.Markup(body))  # fmt: skip

    # -- leaderboard
    def training_length(self) -> int | None:
        """The context length the encodings were pretrained at (the most common one of the pretrain runs)."""
        r = self.q("select training_length L, count(*) k from runs where kind = 'pretrain' and training_length is not "
                   "null group by 1 order by k desc, L limit 1")  # fmt: skip
        return r[0]["L"] if r else None

    def columns(self, kinds: tuple[str, ...]) -> tuple[list[str], dict[str, dict[str, list[tuple]]], list[bool]]:
        """(column labels, name -> label -> [(value, stderr, n, proportion, run_id, scored tokens)], lower-is-better
        flags) for runs of ``kinds``: each task's headline metric (``peeval.records.headline_metrics``), its
        direction the registry's or, for a metric it does not know, lm-eval's (ingest: runs.params.higher_is_better).
        Perplexity: at the training length (else the shortest measured) and the longest; ``self.chosen[label]``:
        its (task, metric)."""
        rows = self.q(
            "select r.name, r.run_id, m.task, m.metric, m.value, m.stderr, m.n from metrics m join runs r using "
            "(run_id) where m.filter = 'none' and list_contains(?, r.kind) order by r.name, m.task, m.metric",
            [list(kinds)],
        )
        hidden: set[str] = set()  # members of a group with its own row (ingest: runs.params.subtasks)
        lm_eval: dict[tuple[str, str], bool] = {}  # lm-eval's direction of a metric the registry does not know
        for r in self.q("select params from runs where list_contains(?, kind)", [list(kinds)]):
            params = json.loads(r["params"]) if r["params"] else {}
            hidden.update(params.get("subtasks") or [])
            for task, ms in (params.get("higher_is_better") or {}).items():
                lm_eval.update({(task, m): up for m, up in ms.items()})
        by_task: dict[tuple[str, str], set[str]] = defaultdict(set)  # (task, what it read) -> metrics
        tokens: dict[tuple[str, str, int], int] = {}  # (run_id, task, L) -> scored tokens of ppl@L
        for r in rows:
            r["label"] = self.labels.get((r["run_id"], r["task"]), r["task"])
            if r["task"] not in hidden:
                by_task[(r["task"], r["label"])].add(r["metric"])
            pm = parse_ppl_metric(r["metric"])
            if pm and pm[0] == "tokens" and r["value"] is not None and math.isfinite(r["value"]):
                tokens[(r["run_id"], r["task"], pm[1])] = int(r["value"])
        train_len = self.training_length()
        chosen: list[tuple[str, str, str, str]] = []  # (task, what it read, metric, column label)
        for task, read in sorted(by_task, key=lambda k: (column_tier(k[0]), k)):
            ms = by_task[(task, read)]
            if ppl_corpus(task) is not None:  # named by the corpus read (peeval.records.task_label)
                lengths = sorted(pm[1] for m in ms if (pm := parse_ppl_metric(m)) and pm[0] == "ppl")
                first = train_len if train_len in lengths else lengths[0] if lengths else None
                for L in sorted({first, lengths[-1]}) if lengths else []:
                    chosen.append((task, read, ppl_metric("ppl", L), f"{read} {ppl_metric('ppl', L)}"))
            elif task.startswith(DIAG_PREFIX):  # every headline accuracy (flip-flop: read_acc, acc, seq_acc)
                chosen += [(task, read, m, f"{task[len(DIAG_PREFIX) :]} {m}") for m in headline_metrics(ms)]
            else:
                plain = [m for m in ms if not is_cell(m) and not is_count(m)]
                m = next(iter(headline_metrics(plain) or sorted(plain)), None)
                if m:
                    chosen.append((task, read, m, "passkey acc" if task == PASSKEY_TASK else f"{read} {m}"))
        want = {(t, read, m): label for t, read, m, label in chosen}
        self.chosen = {label: (t, m) for t, _, m, label in chosen}
        cells: dict[str, dict[str, list[tuple]]] = defaultdict(lambda: defaultdict(list))
        for r in rows:
            label = want.get((r["task"], r["label"], r["metric"]))
            if label:
                proportion = metric_kind(r["task"], r["metric"]) == "fraction"
                pm = parse_ppl_metric(r["metric"])
                tok = tokens.get((r["run_id"], r["task"], pm[1])) if pm else None
                cells[r["name"]][label].append((r["value"], r["stderr"], r["n"], proportion, r["run_id"], tok))
        labels = [label for *_, label in chosen]
        lower = [not higher_is_better(m, lm_eval.get((t, m))) for t, _, m, _ in chosen]
        return labels, cells, lower

    def leaderboard_stats(
        self, kinds: tuple[str, ...]
    ) -> tuple[list[str], dict[str, dict[str, SeedEstimate]], list[bool]]:
        """(column labels, name -> label -> mean ± stderr over its runs, lower-is-better flags): the one
        estimate the claims show too (``peeval.records.seed_estimate``)."""
        labels, cells, lower = self.columns(kinds)
        self.cells = cells
        stats: dict[str, dict[str, SeedEstimate]] = {}
        for name, by in cells.items():
            stats[name] = {}
            for label, vals in by.items():
                per_run = [(v[0], v[1], v[2]) for v in vals if v[0] is not None]
                if per_run:
                    stats[name][label] = seed_estimate(per_run, proportion=vals[0][3])
        return labels, stats, lower

    def run_claims(self) -> list[dict]:
        """The claims that rest on runs of this store, whatever their verdict (reproduced, contradicted,
        inconclusive, not decidable here), so a cell links to the verdict its runs got: id, task, metric, verdict,
        run ids."""
        con = self.claims_con
        if not con.execute("select 1 from information_schema.tables where table_name = 'claims'").fetchall():
            return []
        out = []
        for cid, task, metric, verdict, ids, compared in con.execute(
            "select claim_id, task, metric, verdict, run_ids, compared from claims where verdict in ('reproduced', "
            "'contradicted', 'inconclusive', 'not decidable here') order by claim_id"
        ).fetchall():
            try:
                run_ids = set(json.loads(ids) if isinstance(ids, str) else ids or [])
            except ValueError:
                run_ids = set()
            out.append({"claim_id": cid, "task": task, "metric": metric, "verdict": verdict, "run_ids": run_ids,
                        "other": str(compared or "").rpartition(" vs ")[2]})  # fmt: skip
        return out

    def cell_claims(self, label: str, run_ids: set[str], against: str | None = None) -> list[tuple[str, str]]:
        """(claim_id, verdict) of the claims on this column's task and metric that used these runs
        (``against``: only the claims comparing with that encoding, e.g. rope in the table against RoPE)."""
        task, metric = self.chosen.get(label, (None, None))
        return [(c["claim_id"], c["verdict"]) for c in self.claims
                if c["task"] == task and c["metric"] == metric and c["run_ids"] & run_ids
                and (against is None or c["other"] == against)]  # fmt: skip

    def claim_links(self, claims: list[tuple[str, str]]) -> str:
        if not self.claims_html:
            return ""
        return "".join(f'<a class="claim" href="claims.html#{escape(cid)}" title="{escape(cid)}">claim: {escape(v)}</a>'
                       for cid, v in claims)  # fmt: skip

    def leaderboard_table(self, tid: str, kinds: tuple[str, ...], first: str) -> str:
        """Mean ± stderr (seeds), with its support beside every number: the scored tokens of a perplexity, the
        examples of an accuracy. Bold = best in a column, only among cells with a standard error (a number
        without one is never 'best')."""
        labels, stats, lower = self.leaderboard_stats(kinds)
        if not stats:
            return '<p class="empty">no runs yet</p>'
        best = {}
        for label, low in zip(labels, lower):
            vs = [s[label].value for s in stats.values() if label in s and math.isfinite(s[label].value)
                  and s[label].stderr is not None]  # fmt: skip
            if len(vs) > 1:
                best[label] = min(vs) if low else max(vs)
        headers = [first] + [f"{lab} {'↓' if low else '↑'}" for lab, low in zip(labels, lower)]
        rows = []
        for name in sorted(stats, key=shipped_first):
            row: list[Any] = [Cell(name, name)]
            for label in labels:
                s = stats[name].get(label)
                if s is None:
                    row.append(Cell("–", None, cls="num"))
                    continue
                vals = self.cells[name][label]
                support = [f"{s.seeds} seed{'s' if s.seeds > 1 else ''}"]
                toks = sorted({v[5] for v in vals if v[5] is not None})
                if parse_ppl_metric(self.chosen[label][1]):
                    support.append(
                        f"{toks[0]:,} tokens" + (" per seed" if s.seeds > 1 else "")
                        if len(toks) == 1
                        else "tokens " + "/".join(f"{t:,}" for t in toks)
                        if toks
                        else "tokens unknown"
                    )
                elif s.n is not None:
                    support.append(f"n={s.n:,}")
                if s.stderr is None:
                    support.append("no stderr")
                extra = f' <span class="se">± {escape(fmt(s.stderr))}</span>' if s.stderr is not None else ""
                extra += f'<span class="sub">{escape(", ".join(support))}</span>'
                extra += self.claim_links(self.cell_claims(label, {v[4] for v in vals}))
                cls = "num best" if best.get(label) == s.value and s.stderr is not None else "num"
                row.append(Cell(fmt(s.value), s.value, cls=cls, extra=extra))
            rows.append(row)
        return f'<div class="wide">{self.table(tid, headers, rows, table_cls="sticky")}</div>'

    def front_columns(self) -> list[front.Column]:
        """The headline columns of the comparison with RoPE: perplexity at the training length and the longest
        length of each corpus, passkey, and each diagnostic split's first headline accuracy."""
        cols, seen_diag = [], set()
        for label, (task, metric) in self.chosen.items():
            pm = parse_ppl_metric(metric)
            if pm:
                cols.append(front.Column(task, metric, label, "ppl", pm[1]))
            elif task.startswith(DIAG_PREFIX) and task not in seen_diag:
                seen_diag.add(task)
                cols.append(front.Column(task, metric, label, "acc"))
            elif task == PASSKEY_TASK:
                cols.append(front.Column(task, metric, label, "acc"))
        return cols

    def name_sources(self) -> dict[str, str]:
        """Each leaderboard name's source: ``local``, or ``published/<profile>`` (names ``… @<profile>``)."""
        return {str(r["name"]): str(r["source"]) for r in self.q("select distinct name, source from runs")}

    @staticmethod
    def baseline_of(source: str) -> str:
        """The leaderboard name of ``source``'s RoPE: ``rope`` here, ``rope @<profile>`` for a published profile."""
        profile = published_profile(source)
        return published_name(front.BASELINE, profile) if profile else front.BASELINE

    def vs_rope_table(self, source: str = LOCAL_SOURCE, tid: str = "vs_rope") -> tuple[str, dict]:
        """The answer-first table (leaderboard.front) of one source's runs against that source's own RoPE (a
        published profile is never compared with this machine's runs), and what the page says about it."""
        cols = self.front_columns()
        base = self.baseline_of(source)
        sources = self.name_sources()
        cells = {name: by for name, by in self.cells.items() if sources.get(name, LOCAL_SOURCE) == source}
        info: dict[str, Any] = {"baseline": base, "has_baseline": base in cells}
        if not cols or base not in cells:
            return '<p class="empty">no RoPE runs to compare with</p>', info
        runs = {name: {c.label: [front.Run(v[0], v[1], v[2], v[5], v[4]) for v in by.get(c.label, [])]
                       for c in cols} for name, by in cells.items()}  # fmt: skip
        # a column RoPE never ran (CoPE's counting compares absolute and relative encodings) has nothing to show
        unmatched = [c.label for c in cols if not runs[base][c.label]]
        cols = [c for c in cols if runs[base][c.label]]
        train_len, longest = self.training_length(), max((c.length or 0 for c in cols), default=0)
        headers = ["encoding"]
        for c in cols:
            if c.kind == "ppl":
                corpus = c.label.removesuffix(f" {c.metric}")  # the corpus as read (task_label)
                where = ("in distribution" if c.length == train_len else
                         f"{c.length / train_len:g}× train" if train_len else f"L={c.length}")  # fmt: skip
                headers.append(f"{corpus} ppl ÷ RoPE @{c.length} ({where}) ↓")
            else:
                headers.append(f"{c.label} − RoPE ↑" if c.task == PASSKEY_TASK else
                               f"{c.label[: -len(c.metric) - 1].replace('_', ' ')} {c.metric} − RoPE ↑")  # fmt: skip
        headers.append("wins vs RoPE (interval clear of parity)")
        # no rank: the encodings ran different columns. A fixed order instead: the baseline, the papers' encodings
        # (TAPE, CoPE, PoPE), then the rest by name, so no row moves up on a point estimate
        papers = [short.lower() for short, _, _ in front.PAPERS]

        def order_key(n: str) -> tuple:
            pe = re.match(r"[A-Za-z0-9_]*", n)[0].lower()
            return (n != base, papers.index(pe) if pe in papers else len(papers), natural_key(n))

        order = sorted(runs, key=order_key)
        rows = []
        for name in order:
            row: list[Any] = [Cell(name, name)]
            cells = []
            for c in cols:
                if name == base:
                    row.append(Cell("baseline", None, cls="num", extra=self._base_sub(c, runs[name][c.label])))
                    continue
                vc = front.compare(c, runs[name][c.label], runs[base][c.label])
                cells.append(vc)
                if vc is None:
                    row.append(Cell("not run", None, cls="num"))
                    continue
                vc.claims = self.cell_claims(c.label, {r.run_id for r in runs[name][c.label]}, against=front.BASELINE)
                # colour and the word only from the interval: a win or a loss where it excludes parity
                outcome = vc.outcome
                cls = {"win": "num win", "loss": "num lose"}.get(outcome, "num")
                sub = vc.sub.removesuffix(": no interval")  # said once, as the outcome
                extra = (f'<span class="outcome">{escape(outcome)}</span><span class="sub">{escape(sub)}</span>'
                         + self.claim_links(vc.claims))  # fmt: skip
                row.append(Cell(vc.text, vc.sort, cls=cls, extra=extra))
            if name == base:
                row.append(Cell("–", None, cls="num", extra='<span class="sub">the baseline</span>'))
            else:
                wr = front.win_rate(cells)
                row.append(Cell(wr.text, wr.wins - wr.losses if wr.compared else None, cls="num",
                                extra=f'<span class="sub">{escape(wr.sub)}</span>'))  # fmt: skip
            rows.append(row)
        info.update(longest=longest, train_len=train_len)
        html = f'<div class="wide">{self.table(tid, headers, rows, table_cls="sticky", filt=False)}</div>'
        if unmatched:
            html += (f'<p class="note">No RoPE run for {escape(", ".join(unmatched))}: those columns are in the table'
                     " below, not here.</p>")  # fmt: skip
        return html, info

    @staticmethod
    def _base_sub(c: front.Column, runs: list[front.Run]) -> str:
        e = front.estimate(c, runs)
        if e is None:
            return '<span class="sub">not run</span>'
        return f'<span class="sub">{escape(fmt(e.value))} ({e.seeds} seed{"s" if e.seeds > 1 else ""})</span>'

    def budget_line(self, train_len: int | None, longest: int | None, source: str = LOCAL_SOURCE) -> tuple[str, str]:
        """One line: the training length and the budget every encoding of ``source`` got (runs and efficiency), as
        (the pretraining scale, the diagnostics' budgets and the lengths read)."""
        pre = self.q("select e.params, e.steps, e.tokens, r.name, r.seed from runs r join efficiency e using "
                     "(checkpoint) where r.kind = 'pretrain' and e.task is null and r.source = ?",
                     [source])  # fmt: skip
        bits = [f"Pretrained at context length {train_len:,} tokens" if train_len else "Training length unknown"]
        if pre:
            names = sorted({r["name"] for r in pre})
            params = sorted({r["params"] for r in pre if r["params"]})
            steps = sorted({r["steps"] for r in pre if r["steps"] is not None})
            toks = sorted({r["tokens"] for r in pre if r["tokens"] is not None})
            seeds = max(len({r["seed"] for r in pre if r["name"] == n}) for n in names)

            def span(xs, f=lambda v: f"{v:,}"):
                return "–" if not xs else f(xs[0]) if xs[0] == xs[-1] else f"{f(xs[0])}–{f(xs[-1])}"

            # the scale a reader needs before any verdict: training tokens per parameter (Hoffmann et al.'s ~20
            # is compute-optimal; the claims stage decides no language-model claim below it)
            per = sorted({r["tokens"] / r["params"] for r in pre if r["tokens"] and r["params"]})
            per_text = f" ({span(per, lambda v: f'{v:.2f}')} tokens per parameter)" if per else ""
            size = span(params, lambda v: f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v:,}")
            bits.append(
                f"{len(names)} encodings, each {size} parameters, "
                f"{span(toks)} training tokens in {span(steps)} steps{per_text}, {seeds} seed{'s' if seeds > 1 else ''}"
            )
        diag = self.q("select e.task, min(e.steps) s, min(e.tokens) t, count(distinct r.seed) k, "
                      "string_agg(distinct r.pe, ', ' order by r.pe) pes from runs r join efficiency e using "
                      "(checkpoint) where r.kind = 'diagnostic' and r.source = ? group by 1 order by 1",
                      [source])  # fmt: skip
        for d in diag:
            bits.append(f"{d['task']}: {d['pes']}, {d['s']:,} steps ({d['t']:,} tokens), {d['k']} seeds")
        if longest and train_len:
            bits.append(f"perplexity up to {longest:,} tokens ({longest / train_len:g}× the training length)")
        head = 2 if pre else 1
        return " · ".join(bits[:head]), " · ".join(bits[head:])

    def paper_verdicts(self) -> list[dict]:
        """Per paper checked (front.PAPERS): its link, and the claims page's count of each verdict with the anchor
        of that paper's section; ``scale``: how many of its pairs the claims stage left "not decidable at this
        scale" (language models below the tokens-per-parameter criterion)."""
        con = self.claims_con
        has = con.execute("select 1 from information_schema.tables where table_name = 'claims'").fetchall()
        rows = con.execute("select paper, verdict, coalesce(setting_diff, '') from claims").fetchall() if has else []
        out = []
        for short, title, url in front.PAPERS:
            mine = [(v, sd) for p, v, sd in rows if str(p) == short]
            counts = [(v, sum(1 for m, _ in mine if m == v)) for v in claims_page.VERDICT_CLASS]
            out.append({"short": short, "title": title, "url": url, "arxiv": url.rsplit("/", 1)[-1],
                        "counts": [(v, n) for v, n in counts if n],
                        "scale": sum(1 for v, sd in mine if v == "not decidable here"
                                     and "not decidable at this scale" in sd)})  # fmt: skip
        return out

    def index(self) -> None:
        runs = self.q("select * from runs order by kind, name, date")
        run_rows = [[Cell(r["name"], r["name"], href=f"runs/{r['run_id']}.html"), r["kind"], r["pe"],
                     r["checkpoint"], r["seed"], r["max_length"], r["training_length"], str(r["date"]),
                     r["source"], r["machine"] or "this machine",
                     Cell(r["run_id"], r["run_id"], href=f"runs/{r['run_id']}.html")] for r in runs]  # fmt: skip
        profiles = {(published_profile(r["source"]), r["machine"]) for r in runs}
        published = sorted((p, m) for p, m in profiles if p is not None)
        self.claims = self.run_claims()
        encodings = self.leaderboard_table("leaderboard", ("pretrain", "diagnostic"), "encoding")
        tiers = sorted({column_tier(self.chosen[lab][0]) for lab in self.chosen})

        # the answer first: this machine's runs against its RoPE (a published profile's only where none ran here),
        # each other published profile against its own RoPE, folded below
        with_rope = [src for src in [LOCAL_SOURCE, *(published_source(p) for p, _ in published)]
                     if self.baseline_of(src) in self.cells]  # fmt: skip
        first = with_rope[0] if with_rope else LOCAL_SOURCE
        vs, info = self.vs_rope_table(first)
        machines = {published_source(p): (str(p), str(m)) for p, m in published}
        more = [(*machines[src], pages.Markup(self.vs_rope_table(src, f"vs_rope_{machines[src][0]}")[0]))
                for src in with_rope if src != first]  # fmt: skip
        extension = self.leaderboard_table("extension", ("adapt", "external"), "model / method")
        kinds = [k for t, k in ((0, "perplexity within and beyond the training length"), (1, "passkey retrieval"),
                                (2, "the papers' diagnostics"), (3, "zero-shot tasks")) if t in tiers]  # fmt: skip
        all_runs = self.table("runs_list", ["name", "kind", "pe", "checkpoint", "seed", "max_length",
                                            "training_length", "date", "source", "machine", "run"],
                              run_rows, table_cls="sticky")  # fmt: skip
        all_runs = f'<div class="wide">{all_runs}</div>'
        budget = self.budget_line(info.get("train_len") or self.training_length(), info.get("longest"), first)
        papers = self.paper_verdicts()
        self.files["index.html"] = pages.render(
            "index.html", title="leaderboard", prefix="", links=pages.nav(bool(self.claims_html)),
            budget=budget[0], budget_more=budget[1],
            vs_first=published_profile(first), vs_more=more,
            papers=papers, scale_n=sum(p["scale"] for p in papers), vs_rope=pages.Markup(vs),
            baseline=info["baseline"], level=int(front.LEVEL * 100),
            columns_text=", then ".join(kinds), encodings=pages.Markup(encodings),
            extension=pages.Markup(extension), all_runs=pages.Markup(all_runs),
            published=[(str(p), str(m)) for p, m in published], claims=bool(self.claims_html),
        )  # fmt: skip

    # -- charts
    def over_runs(self, view: str, keys: list[str], values: list[str], *, order: list[str],
                  runs: bool = False, corpus_task: str | None = None) -> tuple[list[str], list[dict]]:  # fmt: skip
        """(headers, rows) of a per-cell view combined over the runs of one name: each value column as its
        metric aggregates over seeds (``peeval.records.METRICS``: the mean, or the sum of a count; ``n``,
        the examples, add up), plus the number of runs when ``runs``. ``corpus_task``: the task prefix of the
        view's ``corpus`` key, which then names the corpus as read (:meth:`task_labels`): runs of one task on
        different data are never combined."""
        aggs = [f"{SEED_SQL[METRICS[v].seeds] if v in METRICS else 'sum'}(v.{v}) {v}" for v in values]
        shown = {k: f"v.{k}" for k in keys}
        join = ""
        if corpus_task is not None:
            shown["corpus"] = "coalesce(l.label, v.corpus) corpus"
            join = f" left join task_labels l on l.run_id = v.run_id and l.task = '{corpus_task}' || v.corpus"
        cols = ["r.name", *shown.values(), *aggs, *(["count(*) runs"] if runs else [])]
        cur = self.con.execute(f"select {', '.join(cols)} from {view} v join runs r using (run_id){join} group by all "
                               f"order by {', '.join(order)}")  # fmt: skip
        headers = [d[0] for d in cur.description]
        return headers, [dict(zip(headers, r)) for r in cur.fetchall()]

    def chart_page(self, path: str, title: str, charts: list[str], *, note: str = "", empty: str,
                   tid: str, headers: list[str], rows: list[dict]) -> None:  # fmt: skip
        """A page of charts (or the line ``empty`` when there are none) above the table of the query
        ``rows`` they are drawn from."""
        table = self.table(tid, headers, [list(r.values()) for r in rows])
        note = f'<p class="note">{note}</p>' if note else ""
        shown = "".join(charts) or f"<p class=empty>{empty}</p>"
        self.page(path, title, f'{note}<div class="charts">{shown}</div><h2>Table</h2>{table}')

    def ppl_page(self) -> None:
        """Perplexity per tokenizer family on its own axes (models trained here share one 2k-token vocabulary;
        adapted / external models have their own, so their perplexities are not comparable with ours); bits per
        byte, which does not depend on the tokenizer, puts every model on one axis. The training length marked."""
        headers, rows = self.over_runs(
            "ppl_by_length",
            ["corpus", "length"],
            ["ppl", "bpb", "tokens", "windows"],
            order=["corpus", "name", "length"],
            runs=True,
            corpus_task=PPL_PREFIX,
        )
        # the pipeline's own models, its extended rope model included (params.base_train: same tokenizer)
        here = {r["name"] for r in self.q("select distinct name from runs where kind in ('pretrain', 'diagnostic') "
                                          "or json_extract(params, '$.base_train') is not null")}  # fmt: skip
        train_len = self.training_length()
        mark = [(train_len, f"training length {train_len}")] if train_len else []
        theirs = [(r["L"], f"training length {r['L']:,}") for r in self.q(
            "select distinct training_length L from runs where kind in ('adapt', 'external') and training_length "
            "is not null order by L")]  # fmt: skip
        groups = (("models trained here (one tokenizer)", lambda n: n in here, mark),
                  ("adapted / external models (own tokenizer)", lambda n: n not in here, theirs))  # fmt: skip
        charts = []
        for corpus in sorted({r["corpus"] for r in rows}):
            for group, member, marks in groups:
                series: dict[str, list] = defaultdict(list)
                for r in rows:
                    if r["corpus"] == corpus and member(r["name"]):
                        series[r["name"]].append((r["length"], r["ppl"]))
                if series:
                    xs = [x for pts in series.values() for x, _ in pts]
                    inside = [m for m in marks if xs and min(xs) <= m[0] <= max(xs)]
                    beyond = [f"{m[0]:,}" for m in marks if m not in inside]  # said, not drawn: squashes the axis
                    title = f"{corpus}: ppl vs context length, {group}"
                    if beyond:  # e.g. "pg19: ppl, adapted / external models (own tokenizer; trained at 8,192)"
                        title = f"{corpus}: ppl, {group[:-1]}; trained at {', '.join(beyond)})"
                    charts.append(line_chart(series, title=title, xlabel="context length (tokens)", ylabel="ppl",
                                             logx=True, logy=True, vlines=inside))  # fmt: skip
            series = defaultdict(list)
            for r in rows:
                if r["corpus"] == corpus:
                    series[r["name"]].append((r["length"], r["bpb"]))
            bmark = [(train_len, f"training length {train_len} (models trained here)")] if train_len else []
            charts.append(line_chart(series, title=f"{corpus}: bits per byte vs context length (every model)",
                                     xlabel="context length (tokens)", ylabel="bpb", logx=True,
                                     vlines=bmark))  # fmt: skip
            charts += self.loss_by_position_charts(corpus, groups)
        protocols = [r["p"] for r in self.q("select distinct protocol p from ppl_by_length where protocol is not null")]
        how = ("Protocol of these runs: " + "; ".join(sorted(protocols)) + ". ") if protocols else ""
        note = (how + "Fixed targets: the same target tokens of every document are scored at every length, each "
                "block of at most L/2 targets by one forward over the L tokens ending at the block's end, so only the "
                "context grows (docs: README \"Perplexity\"). Averaged over runs of the same name. Perplexity is per "
                "token of a model's own tokenizer, so models with different tokenizers get separate perplexity "
                "charts; bits per byte compares them all. The loss by position is the mean NLL per position bucket "
                "inside the longest windows. Each encoding keeps one colour (and dash) on every chart; the dashed "
                "vertical line is the training length. Infinite / exploding values are listed in the table and left "
                "off the charts.")  # fmt: skip
        self.chart_page("ppl.html", "perplexity vs context length", charts, note=note, empty="no perplexity runs",
                        tid="ppl_by_length_table", rows=rows, headers=headers)  # fmt: skip

    def loss_by_position_charts(self, corpus: str, groups) -> list[str]:
        """Issue 27 item 2: mean loss per position bucket inside the longest windows, per tokenizer group as the
        perplexity charts (each bucket averaged over runs of the same name), the training length marked."""
        rows = self.q(  # corpus: as read (task_labels), like the perplexity charts' titles
            "select r.name, p.position, avg(p.nll) nll from loss_by_position p join runs r using (run_id) "
            f"left join task_labels l on l.run_id = p.run_id and l.task = '{PPL_PREFIX}' || p.corpus "
            "where coalesce(l.label, p.corpus) = ? and isfinite(p.nll) group by r.name, p.position "
            "order by r.name, p.position",
            [corpus],
        )
        charts = []
        for group, member, marks in groups:
            series: dict[str, list] = defaultdict(list)
            for r in rows:
                if member(r["name"]):
                    series[r["name"]].append((r["position"], r["nll"]))
            if series:
                xs = sorted({x for pts in series.values() for x, _ in pts})  # bucket starts: the last reaches a step on
                end = xs[-1] + (xs[-1] - xs[-2] if len(xs) > 1 else 0)
                inside = [m for m in marks if xs[0] <= m[0] <= end]
                charts.append(line_chart(series, title=f"{corpus}: loss by position in the longest windows, {group}",
                                         xlabel="position (tokens of context)", ylabel="mean NLL (nats)",
                                         vlines=inside))  # fmt: skip
        return charts

    def passkey_page(self) -> None:
        headers, rows = self.over_runs(
            "passkey_cells", ["length", "depth"], ["acc", "n"], order=["name", "length", "depth"]
        )
        charts = []
        for name in sorted({r["name"] for r in rows}):
            mine = [r for r in rows if r["name"] == name]
            depths = sorted({r["depth"] for r in mine})
            lengths = sorted({r["length"] for r in mine})
            vals = {(r["depth"], r["length"]): r["acc"] for r in mine}
            charts.append(heatmap(depths, lengths, vals, title=f"passkey: {name}", row_label="depth",
                                  col_label="length"))  # fmt: skip
        self.chart_page("passkey.html", "passkey retrieval", charts, empty="no passkey runs", tid="passkey_table",
                        note="Exact match of the pass key per (context length, needle depth) cell.",
                        headers=headers, rows=rows)  # fmt: skip

    def diagnostics_page(self) -> None:
        headers, rows = self.over_runs(
            "diagnostic_cells",
            ["task", "split", "cell", "len_a", "len_b"],
            ["acc", "n"],
            order=["task", "split", "name", "len_a", "len_b", "cell"],
        )
        charts = []
        overall = [r for r in rows if r["cell"] == "all"]
        for task in sorted({r["task"] for r in overall}):
            mine = [r for r in overall if r["task"] == task]
            names, splits = sorted({r["name"] for r in mine}), sorted({r["split"] for r in mine})
            vals = {(r["name"], r["split"]): r["acc"] for r in mine}
            charts.append(heatmap(names, splits, vals, title=f"{task}: accuracy by split", row_label="encoding",
                                  col_label="split", cell=70))  # fmt: skip
        add = [r for r in rows if r["len_a"] is not None]
        for task, split, name in sorted({(r["task"], r["split"], r["name"]) for r in add}):
            mine = [r for r in add if (r["task"], r["split"], r["name"]) == (task, split, name)]
            la, lb = sorted({r["len_a"] for r in mine}), sorted({r["len_b"] for r in mine})
            vals = {(r["len_a"], r["len_b"]): r["acc"] for r in mine}
            charts.append(heatmap(la, lb, vals, title=f"{task} {split}: {name}", row_label="len a",
                                  col_label="len b", cell=26))  # fmt: skip
        note = ("Exact match of the answer (greedy). Addition: accuracy per (length of a, length of b) cell; the "
                "training lengths are the top-left block.")  # fmt: skip
        self.chart_page("diagnostics.html", "diagnostics", charts, note=note, empty="no diagnostic runs",
                        tid="diagnostics_table", rows=rows, headers=headers)  # fmt: skip

    def training_page(self) -> None:
        """Loss curves per encoding; a name trained with several seeds is drawn as the mean over its seeds with
        the band of their range (min to max), never as one line zig-zagging through the seeds."""
        rows = self.q("select c.*, e.pe, e.pe_options, e.method, e.task from training_curves c left join efficiency e "
                      "using (checkpoint) order by checkpoint, step")  # fmt: skip
        bases = {
            r["checkpoint"]: base_model_label(json.loads(r["summary"]).get("gguf_file"))
            for r in self.q(
                "select checkpoint, summary from efficiency where method is not null and summary is not null"
            )
        }
        # an extension of the pipeline's own model is named by its run ("rope (256 tokens) + tape")
        labels: dict[str, str] = {
            r["checkpoint"]: r["name"]
            for r in self.q(
                "select distinct checkpoint, name from runs where json_extract(params, '$.base_train') is not null"
            )  # fmt: skip
        }
        for r in rows:
            ck = r["checkpoint"]
            if ck not in labels:
                opts = json.loads(r["pe_options"]) if r["pe_options"] else None
                base = bases.get(ck)
                labels[ck] = ((adapted_name(base, r["method"]) if base else adapt_label(r["method"])) if r["method"]
                              else encoding_label(r["pe"], opts) if r["pe"] else ck)  # fmt: skip
            r["label"] = labels[ck]
            r["group"] = "adaptation" if r["method"] else r["task"] or ""
        charts = []
        groups = sorted({r["group"] for r in rows})
        for task in groups:
            for col in ("train_loss", "val_loss"):
                by: dict[str, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
                for r in rows:
                    if r["group"] == task and r[col] is not None and math.isfinite(r[col]):
                        by[r["label"]][r["step"]][r["checkpoint"]] = r[col]
                series: dict[str, list] = {}
                bands: dict[str, list] = {}
                for label, steps in by.items():
                    seeds = len({ck for vs in steps.values() for ck in vs})
                    name = label if seeds == 1 else f"{label} (mean of {seeds} seeds)"
                    series[name] = [(st, sum(vs.values()) / len(vs)) for st, vs in sorted(steps.items())]
                    if seeds > 1:
                        bands[name] = [(st, min(vs.values()), max(vs.values())) for st, vs in sorted(steps.items())]
                if series:
                    note = ", band: range over seeds" if bands else ""
                    charts.append(line_chart(series, title=f"{task or 'text pretraining'}: {col}{note}", xlabel="step",
                                             ylabel=col, bands=bands))  # fmt: skip
        # one row per checkpoint (its last point): a table of every step is 100k rows on the claims profile, and
        # every point is a download on the data page (training_curves)
        headers = ["checkpoint", "shown as", "task", "steps", "tokens", "train_loss", "val_loss", "best val_loss",
                   "elapsed_s"]  # fmt: skip
        last: dict[str, dict] = {}
        for r in rows:  # ordered by checkpoint, step
            e = last.setdefault(r["checkpoint"], dict.fromkeys(headers))
            e.update({"checkpoint": r["checkpoint"], "shown as": r["label"], "task": r["group"] or "text pretraining"})
            e.update({"steps" if k == "step" else k: r[k] for k in ("step", "tokens", "train_loss", "elapsed_s")
                      if r[k] is not None})  # fmt: skip
            if r["val_loss"] is not None and math.isfinite(r["val_loss"]):
                best = e["best val_loss"]
                e.update({"val_loss": r["val_loss"],
                          "best val_loss": r["val_loss"] if best is None else min(best, r["val_loss"])})  # fmt: skip
        self.chart_page("training.html", "training curves", charts, empty="no training curves",
                        note="The table: each checkpoint's last logged step (every step: <a href=\"data.html\">"
                        "training_curves</a>).", tid="training_summary", rows=list(last.values()),
                        headers=headers)  # fmt: skip

    def efficiency_page(self) -> None:
        rows = self.q(
            "select checkpoint, pe, pe_options, method, task, params, total_params, flops_per_token, tokens_per_s, "
            "train_time_s, steps, tokens, final_val_loss, final_val_ppl from efficiency order by task, pe, method"
        )
        headers = ["checkpoint", "pe", "pe_options", "method", "task", "params", "total_params", "flops_per_token",
                   "tokens_per_s", "train_time_s", "steps", "tokens", "final_val_loss", "final_val_ppl"]  # fmt: skip
        body = ('<p class="note">Parameters (trainable ones for adapters), FLOPs per token and throughput of each '
                "training / adaptation run on the machine it ran on.</p>" +
                self.table("efficiency_table", headers, [list(r.values()) for r in rows]))  # fmt: skip
        self.page("efficiency.html", "efficiency", body)

    def run_pages(self) -> None:
        for run in self.q("select * from runs"):
            rid = run["run_id"]
            prov = "".join(f"<tr><th>{escape(k)}</th><td>{self._prov_value(k, v)}</td></tr>" for k, v in run.items())
            metrics = self.q("select task, metric, filter, value, stderr, n from metrics where run_id = ?", [rid])
            metrics.sort(key=lambda m: (m["task"], natural_key(m["metric"]), m["filter"]))
            samples = self.q(
                "select task, doc_id, prompt, target, response, correct from ("
                "select *, row_number() over (partition by task order by doc_id) k from samples "
                "where run_id = ?) where k <= ? order by task, doc_id",
                [rid, SAMPLES_PER_TASK],
            )
            srows = "".join(
                f"<tr><td>{escape(s['task'])}</td><td class=num>{s['doc_id']}</td>"
                f"<td><pre>{escape(s['prompt'] or '')}</pre></td><td><pre>{escape(s['target'] or '')}</pre></td>"
                f"<td><pre>{escape(s['response'] or '')}</pre></td><td>{escape(fmt(s['correct']))}</td></tr>"
                for s in samples
            )
            self.data_files(f"samples_{rid}", ["task", "doc_id", "prompt", "target", "response", "correct"],
                            [list(s.values()) for s in samples])  # fmt: skip
            read = self.q("select task, source, location, config, split, revision, documents, documents_sha256, "
                          "params from task_data where run_id = ? order by task", [rid])  # fmt: skip
            read_rows = [[self.labels.get((rid, d["task"]), d["task"]), *d.values()] for d in read]
            body = (
                f"<h2>Provenance</h2><table>{prov}</table>"
                "<h2>Data read</h2>"
                + (self.table(f"data_{rid}", ["shown as", "task", "source", "location", "config", "split", "revision",
                                              "documents", "documents_sha256", "params"], read_rows, prefix="../")
                   if read else f'<p class="empty">{escape(NOT_RECORDED)}</p>')
                + "<h2>Metrics</h2>"
                + self.table(f"metrics_{rid}", ["task", "metric", "filter", "value", "stderr", "n"],
                             [list(m.values()) for m in metrics], prefix="../")
                + f"<h2>Samples (first {SAMPLES_PER_TASK} per task)</h2>"
                f'<div class="tools"><a class="dl" href="../data/samples_{rid}.csv" download>CSV</a>'
                f'<a class="dl" href="../data/samples_{rid}.json" download>JSON</a></div>'
                f"<table><thead><tr><th>task</th><th>doc</th><th>prompt</th><th>target</th><th>response</th>"
                f"<th>correct</th></tr></thead><tbody>{srows}</tbody></table>"
            )  # fmt: skip
            self.page(f"runs/{rid}.html", f"run {run['name']} ({rid})", body)

    @staticmethod
    def _prov_value(key: str, v: Any) -> str:
        if key in ("params", "pe_options") and isinstance(v, str):
            try:
                return f"<pre>{escape(json.dumps(json.loads(v), indent=1, sort_keys=True))}</pre>"
            except ValueError:
                pass
        return escape(fmt(v))

    def compare_page(self) -> None:
        """Any two runs, task by task (:mod:`leaderboard.compare`): the numbers are computed here and embedded;
        the page's script only looks them up for the two runs picked."""
        runs = self.q("select run_id, name, kind, seed from runs order by kind, name, seed, run_id")
        rows = self.q("select run_id, task, doc_id, prompt, target, response, correct from samples "
                      "where correct is not null")  # fmt: skip
        values = self.q("select run_id, task, metric, value, stderr from metrics where filter = 'none'")
        for r in [*rows, *values]:  # tasks named by what they read: a hub run is never paired with a mirror run
            r["task"] = self.labels.get((r["run_id"], r["task"]), r["task"])
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
        for r in self.q("select run_id, task, doc_id, length, ll, tokens, protocol, target_start, target_end "
                        "from ppl_blocks where ll is not null and tokens > 0"):  # fmt: skip
            task = self.labels.get((r["run_id"], r["task"]), r["task"])  # the corpus as read: never two corpora
            scored = (r["protocol"], r["target_start"], r["target_end"], r["tokens"])
            blocks[r["run_id"]][(task, r["length"])][r["doc_id"]] = (scored, r["ll"], r["tokens"])
        ppl_pairs = compare.all_ppl_pairs(blocks)
        data = {"pairs": {k: [dataclasses.asdict(p) for p in v] for k, v in pairs.items()}, "metrics": metrics,
                "examples": examples, "responses": responses,
                "ppl_pairs": {k: [dataclasses.asdict(p) for p in v] for k, v in ppl_pairs.items()}}  # fmt: skip
        text = json.dumps(data, default=_jsonable, separators=(",", ":")).replace("</", "<\\/")
        paired_keys = list(pairs) or list(ppl_pairs)
        first, second = (paired_keys[0].split("|") if paired_keys else [r["run_id"] for r in runs[:2]] + [None, None])[
            :2
        ]
        labels = [{"run_id": r["run_id"], "label": f"{r['name']} · {r['kind']} · seed {fmt(r['seed'])} · {r['run_id']}"}
                  for r in runs]  # fmt: skip
        self.files["compare.html"] = pages.render(
            "compare.html",
            title="compare two runs",
            prefix="",
            links=pages.nav(bool(self.claims_html)),
            runs=labels,
            first=first,
            second=second,
            data=pages.Markup(text),
        )
        self.files["assets/compare.js"] = COMPARE_JS.read_text(encoding="utf-8")

    def data_page(self) -> None:
        items = []
        for t in STORE_TABLES:
            con = self.claims_con if t in CLAIM_TABLES else self.con
            if not con.execute("select 1 from information_schema.tables where table_name = ?", [t]).fetchall():
                continue
            cur = con.execute(f"select * from {t}")
            headers = [d[0] for d in cur.description]
            self.data_files(t, headers, [list(r) for r in cur.fetchall()])
            items.append(f'<li>{escape(t)}: <a href="data/{t}.csv" download>CSV</a> · '
                         f'<a href="data/{t}.json" download>JSON</a></li>')  # fmt: skip
        shown = sorted(self.table_ids)
        body = (
            "<h2>Store tables</h2><p class=note>The whole DuckDB store, table by table (schema: "
            "<code>leaderboard/schema.sql</code>). Query it directly: <code>duckdb leaderboard/peeval.duckdb "
            '"select * from runs"</code>.</p><ul>' + "".join(items) + "</ul><h2>Tables shown on the site</h2><ul>"
            + "".join(f'<li>{escape(t)}: <a href="data/{escape(t)}.csv" download>CSV</a> · '
                      f'<a href="data/{escape(t)}.json" download>JSON</a></li>' for t in shown)
            + "</ul>"
        )  # fmt: skip
        self.page("data.html", "data downloads", body)

    def build(self) -> Path:
        self.index()
        self.ppl_page()
        self.passkey_page()
        self.diagnostics_page()
        self.training_page()
        self.efficiency_page()
        self.run_pages()
        self.compare_page()
        if self.claims_html:
            self.files["claims.html"] = self.claims_html
        self.data_page()
        self.files["assets/site.css"] = CSS
        self.files["assets/site.js"] = JS
        return _write_tree(self.out, self.files)


#: written into every site folder: the manifest of the files that build wrote (JSON: ``{"files": [...]}``); the
#: next build replaces the folder only when every file in it is listed there (a file of the user's is never deleted)
MARKER = ".peeval-site"
#: a folder without a manifest (a site built before the manifest existed) is the site's own only when every file
#: in it is one this build writes or a page of a run that may have left the store since (its run id: 16 hex digits)
_OLD_SITE_FILE = re.compile(
    r"^(?:runs/[0-9a-f]{16}\.html|data/(?:samples_|data_|metrics_)?[0-9a-f]{16}\.(?:csv|json))$"
)


class SiteOutError(Exception):
    """``--out`` names a folder the site may not replace (it holds someone else's files)."""


def _manifest(out: Path) -> set[str] | None:
    """The files the build that wrote ``out`` listed in its manifest; None when it has none (not a site, or one
    built before the manifest: its marker said only who wrote it)."""
    try:
        doc = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    files = doc.get("files") if isinstance(doc, dict) else None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else None


def _check_out(out: Path, files: dict[str, str]) -> None:
    """The site replaces ``out`` whole, so every file in ``out`` must be one a build of the site wrote: listed in
    its manifest (:data:`MARKER`), or, for a folder without one, a file this build writes again or a stale run
    page. A folder with any other file (the user's notes, a store, a page beside the site's) is refused, never
    swapped away: the site deletes only files it wrote."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise SiteOutError(f"--out {out}: exists and is not a folder")
    listed = _manifest(out)
    present = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_symlink() or not p.is_dir())
    if listed is not None:
        foreign = [f for f in present if f not in listed and f != MARKER]
    else:
        foreign = [f for f in present if f not in files and f != MARKER and not _OLD_SITE_FILE.match(f)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SiteOutError(
            f"--out {out}: holds files the site did not write ({shown}); the site replaces its "
            "folder whole, so give a new or empty folder (or move those files out)"
        )


def _write_tree(out: Path, files: dict[str, str]) -> Path:
    """Write into a temporary sibling folder, then swap it in (no half-built site); the temporary
    folder goes on every failure. The folder's manifest (:data:`MARKER`) lists every file written."""
    out = Path(out)
    manifest = {"written_by": "leaderboard.site (peeval): the files of this build; the next build replaces them",
                "files": sorted([*files, MARKER])}  # fmt: skip
    files = {**files, MARKER: json.dumps(manifest, indent=1) + "\n"}
    _check_out(out, files)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for rel, text in files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "index.html"


def build_site(db: str | Path, out: str | Path = DEFAULT_OUT, claims_db: str | Path | None = None) -> Path:
    """Build the site for the store ``db`` into ``out``; returns the path of index.html. The claims
    come from ``claims_db`` (default: claims.duckdb beside ``db``, the claims stage's output) when
    that file exists, else from the store itself."""
    import duckdb

    if claims_db is not None and not Path(claims_db).is_file():
        raise FileNotFoundError(f"--claims-db {claims_db}: no such DuckDB file (run the claims stage first)")
    claims_db = Path(db).with_name("claims.duckdb") if claims_db is None else Path(claims_db)
    con = open_store(db)  # a missing, truncated, locked or foreign file: one line
    try:
        ccon = duckdb.connect(str(claims_db), read_only=True) if claims_db.is_file() else None
    except duckdb.Error as e:
        con.close()
        raise StoreError(
            f"--claims-db {claims_db}: cannot open as a DuckDB database ({str(e).splitlines()[0]})"
        ) from None
    try:
        return Site(con, Path(out), ccon).build()
    finally:
        con.close()
        if ccon is not None:
            ccon.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m leaderboard.site", description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default=str(Path(__file__).with_name("peeval.duckdb")))
    p.add_argument("--claims-db", default=None, help="the claims stage's database (default: beside --db)")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    args = p.parse_args(argv)
    build = lambda: str(build_site(args.db, args.out, args.claims_db).resolve())
    return run_command("site", build, (FileNotFoundError, SiteOutError, StoreError))


if __name__ == "__main__":
    sys.exit(main())
