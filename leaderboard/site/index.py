"""The front page (templates/index.html): the training length and budget in one line, the papers with the claims
page's verdicts on each, each encoding against RoPE with its interval or the reason there is none (a win or a
loss only where the interval excludes parity: ``leaderboard.site.front``), then encodings x task groups (mean ± stderr
over seeds, seeds and scored tokens / examples beside each number), context extension and all runs."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

from leaderboard.site import charts, claims_page, controls, front, pages
from leaderboard.site.budget import budget_line
from leaderboard.site.context import Page, SiteStore, fmt, natural_key
from leaderboard.site.stats import Board, board, cell_claims, column_tier, run_claims
from leaderboard.site.tables import Cell, table
from peeval.records import (
    DIAG_PREFIX,
    LOCAL_SOURCE,
    PASSKEY_TASK,
    parse_ppl_metric,
    published_name,
    published_profile,
    published_source,
    shipped_first,
)


def yours(store: SiteStore) -> dict[str, str]:
    """{name: what its row says under the name} of the runs added beside a published profile's (this machine's or
    plain lm_eval's, on a site that holds published rows): marked as yours, with the size, training length and
    tokenizer that tell whether it shares the profile's budget (it need not)."""
    rows = store.view("run_scale")
    if not any(published_profile(str(r["source"])) for r in rows):
        return {}
    out: dict[str, str] = {}
    for r in rows:
        if published_profile(str(r["source"])) or str(r["name"]) in out:
            continue
        size = f"{r['params']:,} parameters" if r["params"] else "size not recorded"
        trained = f"context {r['training_length']:,}" if r["training_length"] else "training length not recorded"
        if r["tokens"]:
            trained += f", {r['tokens']:,} training tokens"
        tok = (f"tokenizer {r['tokenizer']}" + (f" ({int(r['vocab_size']):,})" if r["vocab_size"] else "")
               + (f" hash {r['tokenizer_hash']}" if r.get("tokenizer_hash") else "")
               if r["tokenizer"] else "tokenizer not recorded")  # fmt: skip
        run = str(r["results_path"] or "").replace("\\", "/").rsplit("/", 2)[-2:-1]  # its results folder: the run name
        out[str(r["name"])] = " · ".join(["yours", *(f"run {x}" for x in run), size, trained, tok])
    return out


def _name_cell(name: str, mine: dict[str, str]) -> Cell:
    """A row's name; a run of yours carries the badge and its scale (``yours``)."""
    return Cell(name, name, cls="yours", sub=mine[name]) if name in mine else Cell(name, name)


def leaderboard_table(store: SiteStore, b: Board, claims: list[dict], tid: str, first: str, *,
                      table_cls: str = "sticky", best_bold: bool = True) -> pages.Markup:  # fmt: skip
    """Mean ± stderr (seeds), with its support beside every number: the scored tokens of a perplexity, the
    examples of an accuracy. Bold = best in a column, only among cells with a standard error (a number
    without one is never 'best'); none with ``best_bold`` False (the untrained controls compete for nothing)."""
    stats = b.stats
    if not stats:
        return pages.Markup(pages.render("board.html", table=None))
    best = {}
    for label, low in zip(b.labels, b.lower):
        vs = [s[label].value for s in stats.values() if label in s and math.isfinite(s[label].value)
              and s[label].stderr is not None]  # fmt: skip
        if len(vs) > 1 and best_bold:
            best[label] = min(vs) if low else max(vs)
    tables = store.position_tables()
    headers = [first] + [f"{lab} {'↓' if low else '↑'}" for lab, low in zip(b.labels, b.lower)]
    rows = []
    mine = yours(store)
    for name in sorted(stats, key=shipped_first):
        row: list[Any] = [_name_cell(name, mine)]
        for label in b.labels:
            s = stats[name].get(label)
            if s is None:
                row.append(_missing(tables.get(name), b.chosen[label][1], "–"))
                continue
            vals = b.cells[name][label]
            support = [f"{s.seeds} seed{'s' if s.seeds > 1 else ''}"]
            toks = sorted({v[5] for v in vals if v[5] is not None})
            if parse_ppl_metric(b.chosen[label][1]):
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
            cls = "num best" if best.get(label) == s.value and s.stderr is not None else "num"
            se = None if s.stderr is None else fmt(s.stderr)
            used = cell_claims(b, claims, label, {v[4] for v in vals})
            row.append(Cell(fmt(s.value), s.value, cls=cls, se=se, sub=", ".join(support), claims=used))
        rows.append(row)
    return table(store, tid, headers, rows, table_cls=table_cls, wide=True)


def front_columns(b: Board) -> list[front.Column]:
    """The headline columns of the comparison with RoPE: perplexity at the training length and the longest
    length of each corpus, passkey, and each diagnostic split's first headline accuracy."""
    cols, seen_diag = [], set()
    for label, (task, metric) in b.chosen.items():
        pm = parse_ppl_metric(metric)
        if pm:
            cols.append(front.Column(task, metric, label, "ppl", pm[1]))
        elif task.startswith(DIAG_PREFIX) and task not in seen_diag:
            seen_diag.add(task)
            cols.append(front.Column(task, metric, label, "acc"))
        elif task == PASSKEY_TASK:
            cols.append(front.Column(task, metric, label, "acc"))
    return cols


def baseline_of(source: str, setting: str | None = None) -> str:
    """The leaderboard name of ``source``'s RoPE: ``rope`` here, ``rope @<profile>`` for a published profile; at a
    diagnostic generator ``setting`` (``n_instr=256``), the RoPE trained at it (``rope {n_instr=256}``)."""
    profile = published_profile(source)
    name = front.BASELINE + (f" {{{setting}}}" if setting else "")
    return published_name(name, profile) if profile else name


def _header(c: front.Column, train_len: int | None) -> str:
    if c.kind == "ppl":
        corpus = c.label.removesuffix(f" {c.metric}")  # the corpus as read (task_label)
        where = ("in distribution" if c.length == train_len else
                 f"{c.length / train_len:g}× train" if train_len else f"L={c.length}")  # fmt: skip
        return f"{corpus} ppl ÷ RoPE @{c.length} ({where}) ↓"
    return (f"{c.label} − RoPE ↑" if c.task == PASSKEY_TASK else
            f"{c.label[: -len(c.metric) - 1].replace('_', ' ')} {c.metric} − RoPE ↑")  # fmt: skip


def _missing(table_rows: int | None, metric: str, other: str = "not run") -> Cell:
    """A cell with no run: "n/a" for a perplexity length past the row's position table (``table_rows``, as
    the store records it: peeval_ppl writes no cell there, issue 43); else "not run"."""
    pm = parse_ppl_metric(metric)
    if table_rows and pm and pm[1] > table_rows:
        return Cell("n/a", None, cls="num", sub=f"no position row past {table_rows}")
    return Cell(other, None, cls="num")


def _base_cell(c: front.Column, runs: list[front.Run]) -> Cell:
    e = front.estimate(c, runs)
    sub = "not run" if e is None else f"{fmt(e.value)} ({e.seeds} seed{'s' if e.seeds > 1 else ''})"
    return Cell("baseline", None, cls="num", sub=sub)


def vs_rope_table(store: SiteStore, b: Board, claims: list[dict], source: str = LOCAL_SOURCE,
                  tid: str = "vs_rope", with_yours: bool = False) -> tuple[pages.Markup, dict]:  # fmt: skip
    """The answer-first table (leaderboard.site.front) of one source's runs against that source's own RoPE (a
    published profile is never compared with this machine's runs), and what the page says about it."""
    cols = front_columns(b)
    base = baseline_of(source)
    rows = {str(r["name"]): r for r in store.view("name_sources")}
    # a ladder rung (runs.size) is compared with its own rung's RoPE, on the sizes page (site/ladder.py); a
    # diagnostic run at another generator setting (cope {n_instr=256}) with the RoPE of that setting, if one ran
    run = {name: rows.get(name, {"source": LOCAL_SOURCE, "size": None, "task_setting": None}) for name in b.cells}
    mine = {name for name in b.cells if run[name]["source"] == source and run[name]["size"] is None}
    base_of = {name: baseline_of(source, run[name]["task_setting"]) for name in mine}
    cells = {name: b.cells[name] for name in mine if base_of[name] in mine}
    info: dict[str, Any] = {"baseline": base, "has_baseline": base in cells}
    if not cols or base not in cells:
        return pages.Markup(pages.render("vs_rope.html", table=None)), info
    runs = {name: {c.label: [front.Run(v[0], v[1], v[2], v[5], v[4])
                             for v in by.get(c.label, [])]  # run-id order (stats.board)
                   for c in cols} for name, by in cells.items()}  # fmt: skip
    own = yours(store)
    per_byte = set()
    if with_yours and published_profile(source) and own:  # your runs beside a published board: its RoPE
        per_byte = _your_runs(store, cols, runs, set(own), base)
        base_of.update({name: base + (" (per byte)" if name in per_byte else "") for name in own if name in runs})
    # a column RoPE never ran (CoPE's counting compares absolute and relative encodings) has nothing to show
    unmatched = [c.label for c in cols if not runs[base][c.label]]
    cols = [c for c in cols if runs[base][c.label]]
    train_len, longest = store.training_length(), max((c.length or 0 for c in cols), default=0)
    tables = store.position_tables()
    headers = ["encoding", *(_header(c, train_len) for c in cols), "wins vs RoPE (interval clear of parity)"]
    # no rank: the encodings ran different columns. A fixed order instead: the baseline, the papers' encodings
    # (TAPE, CoPE, PoPE), then the rest by name, so no row moves up on a point estimate
    papers = [short.lower() for short, _, _ in front.PAPERS]

    def order_key(n: str) -> tuple:
        pe = re.match(r"[A-Za-z0-9_]*", n)[0].lower()
        return (n != base, papers.index(pe) if pe in papers else len(papers), natural_key(n))

    rows = []
    by_column: dict[str, list] = defaultdict(list)  # the board's own cells per perplexity column (detectable)
    seeds: set[tuple[int, int]] = set()
    picture: list[dict] = []  # the front page's picture: each encoding's perplexity ÷ RoPE's, with its interval
    shown_names = [n for n in runs if n in base_of]  # the board's RoPE per byte is no row of its own
    for name in sorted(shown_names, key=lambda n: (n in own, order_key(n))):  # yours last, marked
        row: list[Any] = [_name_cell(name, own)]
        compared = []
        against = base_of[name]
        if name != against:
            mark = (" (yours, per byte)" if name in per_byte else " (yours)") if name in own else ""
            picture.append({"name": name + mark, "cells": {}})
        for c in cols:
            if name == against:
                row.append(_base_cell(c, runs[name][c.label]))
                continue
            vc = front.compare(c, runs[name][c.label], runs[against][c.label])
            compared.append(vc)
            if vc is not None and vc.diff is not None and c.kind == "ppl" and name not in own:
                by_column[c.label].append(vc)
                seeds.add((len(runs[name][c.label]), len(runs[against][c.label])))
            if vc is not None and c.kind == "ppl":
                lo, hi = (math.exp(vc.diff.lo), math.exp(vc.diff.hi)) if vc.diff is not None else (None, None)
                picture[-1]["cells"][c.label] = (vc.sort, lo, hi, vc.outcome)
            if vc is None:
                row.append(_missing(tables.get(name), c.metric))
                continue
            vc.claims = cell_claims(b, claims, c.label, {r.run_id for r in runs[name][c.label]}, against=front.BASELINE)
            # colour and the word only from the interval: a win or a loss where it excludes parity
            cls = {"win": "num win", "loss": "num lose"}.get(vc.outcome, "num")
            sub = vc.sub.removesuffix(": no interval")  # said once, as the outcome
            if name in per_byte and c.kind == "ppl":  # another tokenizer: perplexity per byte (2^bpb), never per token
                sub = "per byte (another tokenizer): 2^bpb ÷ RoPE's; " + sub
            row.append(Cell(vc.text, vc.sort, cls=cls, outcome=vc.outcome, claims=vc.claims, sub=sub))
        if name == against:
            row.append(Cell("–", None, cls="num", sub="the baseline" + (" at this setting" if name != base else "")))
        else:
            wr = front.win_rate(compared)
            row.append(Cell(wr.text, wr.wins - wr.losses if wr.compared else None, cls="num", sub=wr.sub))
        rows.append(row)
    info.update(longest=longest, train_len=train_len, picture=_picture(cols, picture, train_len))
    shown = table(store, tid, headers, rows, table_cls="sticky", filt=False, wide=True, fold=None)  # the answer
    detect = detectable_line([c for c in cols if c.label in by_column], by_column, seeds)
    return pages.Markup(pages.render("vs_rope.html", table=shown, unmatched=", ".join(unmatched), detect=detect,
                                     tid=tid)), info  # fmt: skip


def detectable_line(cols: list[front.Column], by_column: dict[str, list], seeds: set[tuple[int, int]]) -> str | None:
    """The board's detectable difference, one line: per perplexity column the smallest ratio its seeds tell from
    parity (``front.detectable``), how many seeds that rests on, and how it is computed."""
    parts = [f"×{d:.2f} (or below ×{1 / d:.2f}) at {c.length:,} tokens" for c in cols
             if (d := front.detectable(by_column[c.label]))]  # fmt: skip
    if not parts:
        return None
    n = sorted({f"{a} vs {b}" for a, b in seeds})
    return (
        f"Smallest difference this board can detect: a perplexity ratio beyond {', '.join(parts)}, with "
        f"{' or '.join(n)} seeds a side; the median half-width of the {int(front.LEVEL * 100)}% "
        "intervals over seeds in each column above. A true difference nearer ×1 reads within noise here."
    )


def _your_runs(store: SiteStore, cols: list[front.Column], runs: dict, own: set[str], base: str) -> set[str]:
    """Add your runs (``yours``) to ``runs``, each column as the board's; a run on another tokenizer than the
    board's RoPE is compared by perplexity per byte (2^bpb, which no tokenizer changes) in its perplexity
    columns, never per token. The names compared per byte."""
    toks = {r["name"]: r.get("tokenizer_hash") for r in store.view("ppl_by_length")}
    values: dict[tuple[str, str, str], list[tuple]] = defaultdict(list)
    for r in store.view("metric_rows", "list_contains(?, name)", [sorted(own)], order="name, task, metric, run_id"):
        values[(r["name"], r["task"], r["metric"])].append((r["value"], r["stderr"], r["n"], r["run_id"]))
    per_byte = set()
    for name in sorted(own):
        other = toks.get(name) is None or toks.get(name) != toks.get(base)
        got: dict[str, list[front.Run]] = {}
        for c in cols:
            metric = c.metric.replace("ppl@", "bpb@") if c.kind == "ppl" and other else c.metric
            vals = values.get((name, c.task, metric), [])
            if metric != c.metric:  # 2^bpb: a perplexity per byte, RoPE's likewise below
                vals = [(2.0**v, None, n, rid) for v, _, n, rid in vals if v is not None and math.isfinite(v)]
            got[c.label] = [front.Run(v, se, n, None, rid) for v, se, n, rid in vals]
        if any(got.values()):
            runs[name] = got
            per_byte |= {name} if other else set()
    if per_byte:  # the board's RoPE per byte too, for those rows only (its per-token row stays as it is)
        base_bpb = defaultdict(list)
        for r in store.view("metric_rows", "name = ?", [base], order="task, metric, run_id"):
            if r["metric"].startswith("bpb@") and r["value"] is not None:
                base_bpb[(r["task"], r["metric"])].append(front.Run(2.0 ** r["value"], None, r["n"], None, r["run_id"]))
        runs[base + " (per byte)"] = {c.label: base_bpb.get((c.task, c.metric.replace("ppl@", "bpb@")), [])
                                      for c in cols}  # fmt: skip
    return per_byte


def _picture(cols: list[front.Column], rows: list[dict], train_len: int | None) -> dict | None:
    """The front page's picture and its one-sentence reading: the first corpus's perplexity ÷ RoPE's at the
    training length and at the longest length, one row per encoding (charts.ratio_chart)."""
    ppl = [c for c in cols if c.kind == "ppl"]
    if not ppl or not rows:
        return None
    corpus = ppl[0].label.removesuffix(f" {ppl[0].metric}")
    mine = [c for c in ppl if c.label.removesuffix(f" {c.metric}") == corpus]
    chosen = [c for c in mine if c.length == train_len][:1] + [max(mine, key=lambda c: c.length or 0)]
    chosen = list({c.label: c for c in chosen}.values())

    def panel(c: front.Column) -> str:
        if train_len and c.length == train_len:
            return f"{c.length:,} tokens (in distribution)"
        return (
            f"{c.length:,} tokens ({c.length / train_len:g}× training length)" if train_len else f"{c.length:,} tokens"
        )

    panels = [panel(c) for c in chosen]
    shown = [{"name": r["name"], "cells": {panel(c): r["cells"].get(c.label) for c in chosen}} for r in rows]
    shown = [r for r in shown if any(r["cells"].values())]
    if not shown:
        return None
    level = int(front.LEVEL * 100)
    svgs = [charts.ratio_chart(shown, [p], title=f"{corpus} at {p}: perplexity ÷ RoPE's, {level}% interval over seeds")
            for p in panels]  # fmt: skip
    parts = []
    for p in panels:
        outs = [r["cells"][p][3] for r in shown if r["cells"].get(p)]
        rest = [f"{outs.count(w)} {w}" for w in ("within noise", "no interval") if outs.count(w)]
        parts.append(f"at {p} {outs.count('win')} of {len(outs)} encodings beat RoPE and {outs.count('loss')} "
                     "lose to it" + (f" ({', '.join(rest)})" if rest else ""))  # fmt: skip
    reading = parts[0][0].upper() + "; ".join(parts)[1:] + "."
    papers = {short.lower(): short for short, _, _ in front.PAPERS}
    for r in shown:  # the papers' encodings in numbers (the picture draws them; the text says them)
        pe, _, rest = r["name"].partition(" ")
        if pe in papers and (not rest or re.fullmatch(r"@[\w-]+", rest)):
            said = [f"{front.ratio_words(cell[0], cell[1], cell[2], cell[3])} at {p.split(' (')[0]}"
                    for p in panels if (cell := r["cells"].get(p))]  # fmt: skip
            reading += f" {papers[pe]} ÷ RoPE: {'; '.join(said)}."
    return {"svg": pages.Markup("".join(svgs)), "reading": reading}


def paper_verdicts(store: SiteStore) -> list[dict]:
    """Per paper checked (front.PAPERS): its link, and the claims page's count of each verdict with the anchor
    of that paper's section; ``scale``: how many of its pairs the claims stage left "not decidable at this
    scale" (language models below the tokens-per-parameter criterion)."""
    rows = [(r["paper"], r["verdict"], r["setting_diff"]) for r in store.view("claims_by_paper")]
    out = []
    for short, title, url in front.PAPERS:
        mine = [(v, sd) for p, v, sd in rows if str(p) == short]
        counts = [(v, sum(1 for m, _ in mine if m == v)) for v in claims_page.VERDICT_CLASS]
        out.append({"short": short, "title": title, "url": url, "arxiv": url.rsplit("/", 1)[-1],
                    "counts": [(v, n) for v, n in counts if n],
                    "scale": sum(1 for v, sd in mine if v == "not decidable here"
                                 and "not decidable at this scale" in sd)})  # fmt: skip
    return out


def render(store: SiteStore) -> Page:
    runs = store.view("runs", order="kind, name, date, run_id")
    run_rows = [[Cell(r["name"], r["name"], href=f"runs/{r['run_id']}.html"), r["kind"], r["pe"],
                 r["checkpoint"], r["seed"], r["max_length"], r["training_length"], str(r["date"]),
                 r["source"], r["machine"] or "this machine",
                 Cell(r["run_id"], r["run_id"], href=f"runs/{r['run_id']}.html")] for r in runs]  # fmt: skip
    profiles = {(published_profile(r["source"]), r["machine"]) for r in runs}
    published = sorted((p, m) for p, m in profiles if p is not None)
    claims = run_claims(store)
    # the runs' untrained step-0 controls: a band of their own, out of the answer and of every count (controls.py)
    main, untrained = controls.split(board(store, ("pretrain", "diagnostic")))
    encodings = leaderboard_table(store, main, claims, "leaderboard", "encoding")
    step0 = (leaderboard_table(store, untrained, claims, "controls", "untrained control (step 0)",
                               table_cls="sticky controls", best_bold=False) if untrained.stats else None)  # fmt: skip
    tiers = sorted({column_tier(main.chosen[lab][0]) for lab in main.chosen})

    # the answer first: this machine's runs against its RoPE (a published profile's only where none ran here),
    # each other published profile against its own RoPE, folded below
    with_rope = [src for src in [LOCAL_SOURCE, *(published_source(p) for p, _ in published)]
                 if baseline_of(src) in main.cells]  # fmt: skip
    first = with_rope[0] if with_rope else LOCAL_SOURCE
    vs, info = vs_rope_table(store, main, claims, first, with_yours=True)  # the answer: yours in it too
    machines = {published_source(p): (str(p), str(m)) for p, m in published}
    more = [(*machines[src], vs_rope_table(store, main, claims, src, f"vs_rope_{machines[src][0]}")[0])
            for src in with_rope if src != first]  # fmt: skip
    ext = board(store, ("adapt", "external"), per_byte=True)  # their tokenizers differ: bits per byte too
    extension = leaderboard_table(store, ext, claims, "extension", "model / method")
    kinds = [k for t, k in ((0, "perplexity within and beyond the training length"), (1, "passkey retrieval"),
                            (2, "the papers' diagnostics"), (3, "zero-shot tasks")) if t in tiers]  # fmt: skip
    all_runs = table(store, "runs_list", ["name", "kind", "pe", "checkpoint", "seed", "max_length", "training_length",
                                          "date", "source", "machine", "run"], run_rows, table_cls="sticky",
                     wide=True)  # fmt: skip
    budget = budget_line(store, info.get("train_len") or store.training_length(), info.get("longest"), first)
    papers = paper_verdicts(store)
    html = pages.render(
        "index.html", title="leaderboard", prefix="", links=store.nav(),
        budget=budget[0], budget_more=budget[1],
        vs_first=published_profile(first), vs_more=more,
        papers=papers, scale_n=sum(p["scale"] for p in papers), vs_rope=vs, picture=info.get("picture"),
        baseline=info["baseline"], level=int(front.LEVEL * 100),
        columns_text=", then ".join(kinds), encodings=encodings,
        extension=extension, all_runs=all_runs, controls=step0, n_controls=len(untrained.stats),
        published=[(str(p), str(m)) for p, m in published], claims=bool(store.claims_html),
        yours=sorted(yours(store)),
    )  # fmt: skip
    return Page("index.html", "leaderboard", html)
