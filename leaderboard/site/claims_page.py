"""The "Claims" page: each paper's headline results next to peeval's measurement and a verdict.

``render_claims_page(con)`` returns the page (leaderboard/site/templates/claims.html, which extends the
site's base page; no script, no network) from the ``claims`` and ``claim_values`` tables that
``pipelines/claims.py`` writes, or None when there is no ``claims`` table yet. The site builder
(leaderboard/site/claims.py) writes it as ``claims.html`` beside ``runs/<run_id>.html``, which the run links
point to. Every string from the store is escaped (the templates autoescape; the forest plot's SVG
escapes its texts with :func:`html.escape`).

Per paper the answer comes first: the decided pairs (with their test, p and Holm-adjusted p) and a forest
plot of every measured pair (:func:`forest_svg`: peeval's difference with its 95 % interval beside the
paper's difference, a zero line), then the inconclusive pairs (numbers, no decision), then the pairs not decidable
here (numbers of another setting than the claim's: in-window lengths for a claim about going beyond the window; the
reason shown open, no forest row), then the pairs not measured in this store (naming the profile that measures
them). Setting differences, per-encoding numbers and runs are folded under each row (``<details>``).
"""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

from leaderboard.claims.decision import ALPHA
from leaderboard.site import pages
from leaderboard.site.charts import wrap_name
from peeval.records import fmt_number, t_quantile

PAPER_ORDER = ("PoPE", "CoPE", "TAPE")
#: the eight states, in the page's order, and their CSS class
VERDICT_CLASS = {"reproduced": "ok", "contradicted": "bad", "inconclusive": "unk",
                 "holds at initialisation (architecture)": "ai", "not learned at this scale": "nl",
                 "no contrast at this setting": "nc", "not decidable here": "nd", "not measured": "nm"}  # fmt: skip
#: what each answer means, as the claims page defines it above its counts
VERDICT_MEANING = {
    "reproduced": "peeval's difference over >= 3 training runs a side is significant in the paper's direction.",
    "contradicted": "significant the other way.",
    "inconclusive": "tested over runs, not significant after Holm's correction within the paper's family.",
    "holds at initialisation (architecture)": "decided, but the runs' own step-0 (untrained) controls are decided "
    "the same way by the same rule: the encoding's formula gives it, not training; the row shows both numbers.",
    "not learned at this scale": "a side did not learn the task: a run below the majority answer + claims.yaml's "
    "margin in distribution (every run counts), a run still improving when training stopped, an extension no better "
    "than its base at the new length, or SCROLLS answers empty or repeated: the numbers, no test.",
    "no contrast at this setting": "both sides at the same floor or ceiling on every seed (or exactly equal with no "
    "uncertainty): no test.",
    "not decidable here": "measured, but not decidable in this store: fewer than 3 independently trained runs a "
    "side, a setting other than the claim's (inside a window the claim goes beyond, below the training budget), a pair "
    "not in the profile's pre-registered family, or a test that failed its A/A check: the row says which.",
    "not measured": "this store has no peeval number for a side: the row names the first profile "
    "(params/<name>.yaml) that measures it, or none.",
}
DECIDED = ("reproduced", "contradicted")
#: the answers that are no test: the paper's summary counts them together as "not decidable"
UNDECIDABLE = ("not learned at this scale", "no contrast at this setting", "not decidable here")
#: a group of a paper's pairs longer than this is folded under its heading (the page leads with its answer)
FOLD_PAIRS = 3
AT_INIT = "holds at initialisation (architecture)"  # tested like the inconclusive rows, shown among them
#: the forest plot's interval: two-sided 95 % with the test's degrees of freedom (normal where none)
LEVEL = 0.95


def _rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _has(con, table: str) -> bool:
    q = "SELECT count(*) FROM information_schema.tables WHERE table_name = ?"
    return bool(con.execute(q, [table]).fetchone()[0])


def _run_ids(raw: Any) -> list[str]:
    try:
        ids = json.loads(raw) if isinstance(raw, str) else list(raw or [])
    except (TypeError, ValueError):
        ids = []
    return [str(i) for i in ids]


def _values(vals: list[dict], side: str) -> list[str]:
    """'tape 32.82', 'rope 26.32' (paper, ± its std) or with ± stderr and seeds (peeval)."""
    parts = []
    for v in vals:
        if side == "paper":
            num = fmt_number(v["paper_value"])
            if v.get("paper_std") is not None:
                num += f" ± {fmt_number(v['paper_std'])}"
        else:
            num = fmt_number(v["peeval_value"])
            if v.get("peeval_value") is not None and v.get("stderr") is not None:
                num += f" ± {fmt_number(v['stderr'], 2)}"
            if v.get("seeds"):
                num += f" ({v['seeds']} seed{'s' if v['seeds'] != 1 else ''})"
        parts.append(f"{v['variant']} {num}")
    return parts


def fmt_p(p: Any) -> str:
    """A p-value as a reader wants it: 2 significant digits ('0.037', '1.2e-04' below 0.001), '< 1e-6' below
    that, '—' for none."""
    if p is None or not isinstance(p, (int, float)) or math.isnan(p):
        return "—"
    if p < 1e-6:
        return "< 1e-6"
    return f"{p:.1e}" if p < 0.001 else f"{p:.2g}"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def half_width(se: Any, df: Any, level: float = LEVEL) -> float | None:
    """The half-width of the two-sided ``level`` interval: t_{(1+level)/2, df}·se (normal where df is None)."""
    se, df = _num(se), _num(df)
    if se is None:
        return None
    return t_quantile((1.0 + level) / 2.0, df) * se


def _test_label(c: dict) -> str:
    test = c.get("test")
    if not test:
        return "—"
    if test == "mcnemar":
        return "mcnemar (exact)"
    df = _num(c.get("df"))
    return f"{test}, t({fmt_number(df)})" if df is not None else f"{test}, normal"


def _row(c: dict, values: dict[str, list[dict]], shown: str = "") -> dict:
    """What the template shows of one ``claims`` row (texts; the template escapes them); ``shown``: its name as
    :func:`distinguish` gives it, whose part beyond ``compared · task`` is what tells it from a row alike."""
    base_id = str(c["claim_id"]).split(":", 1)[0]
    focus, _, other = str(c["compared"]).partition(" vs ")
    vals = [v for v in values.get(base_id, []) if str(v["variant"]) in (focus, other)]
    vals.sort(key=lambda v: str(v["variant"]) != focus)
    diff = fmt_number(c["peeval_value"])
    if c["peeval_value"] is not None and c["stderr"] is not None:
        diff += f" ± {fmt_number(c['stderr'], 2)}"
    verdict = str(c["verdict"])
    return {"claim_id": str(c["claim_id"]), "ref": str(c["ref"]), "task": str(c["task"]), "metric": str(c["metric"]),
            "compared": str(c["compared"]), "paper": _values(vals, "paper"), "peeval": _values(vals, "peeval"),
            "paper_diff": fmt_number(c["paper_value"]), "diff": diff, "test": _test_label(c),
            "p": fmt_p(c.get("p_value")), "p_adj": fmt_p(c.get("p_adjusted")),
            "n": fmt_number(c["n"]), "seeds": fmt_number(c["seeds"]), "verdict": verdict,
            "cls": VERDICT_CLASS.get(verdict, "unk"), "setting": str(c["setting_diff"] or ""),
            "measured_in": str(c.get("measured_in") or "none"), "run_ids": _run_ids(c["run_ids"]),
            "sensitivity": "",
            "differs": shown.removeprefix(f"{c['compared']} · {c['task']}").removeprefix(" · ")}  # fmt: skip


def sensitivity_line(s: dict) -> str:
    """One line of a decided pair's calibrated error rate and three sensitivities (table ``claims_sensitivity``)."""
    rate = (f"calibrated error rate {s['welch_rate']:.3f} ({s['welch_lo']:.3f}–{s['welch_hi']:.3f}) for Welch's t at "
            f"this pair's spreads (sd {fmt_number(s['sd_focus'], 2)} vs {fmt_number(s['sd_other'], 2)}, "
            f"{s['n_focus']} vs {s['n_other']} runs, {s['draws']:,} simulated nulls; pooled t: "
            f"{s['pooled_rate']:.3f})")  # fmt: skip
    pooled = (f"pooled t: p {fmt_p(s['p_pooled'])}, Holm {fmt_p(s['p_pooled_adjusted'])} → "
              f"{s['verdict_pooled']}")  # fmt: skip
    store = f"store-wide family (m = {s['store_m']}): Holm {fmt_p(s['p_store_adjusted'])} → {s['verdict_store']}"
    return " · ".join([rate, pooled, store, str(s.get("second_note") or "no second size")])


def forest_svg(claims: list[dict], title: str) -> str:
    """One row per measured pair: peeval's difference (focus − other, the paper's unit) as a dot with its 95 %
    interval, the paper's difference as a diamond, a zero line. The pairs' units differ (accuracy points,
    perplexity, ×10⁻² attention), so each row has its own scale, symmetric about zero; the numbers are printed
    beside it. '' when no pair has a peeval difference."""
    rows = [c for c in claims if _num(c.get("peeval_value")) is not None]
    if not rows:
        return ""
    label_w, plot_w, text_w, head, line_h = 380, 360, 330, 40, 15
    top = head + 28
    # each row's label whole, over as many lines as it needs (52 characters of 12 px text in the 380 px column)
    labels = [wrap_name(name, 52) for name in distinguish(rows)]
    heights = [max(26, line_h * len(lines) + 11) for lines in labels]
    width, height = label_w + plot_w + text_w, top + sum(heights) + 8
    x0 = label_w + plot_w / 2
    out = [
        f'<svg class="forest" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<text x="4" y="16" class="ctitle">{escape(title)}</text>',
        # the legend: what the marks are (the page's text says it too; the picture alone must)
        f'<circle cx="10" cy="{head - 5}" r="4.5" class="unk"/>'
        f'<text x="20" y="{head}" class="legend">peeval\'s difference, line: its 95 % interval</text>'
        f'<path d="M330 {head - 11}L335 {head - 5}L330 {head + 1}L325 {head - 5}Z" class="paper"/>'
        f'<text x="340" y="{head}" class="legend">the paper\'s difference</text>'
        f'<text x="520" y="{head}" class="legend">colour: the verdict · each row on its own scale, 0 at the '
        "dashed line</text>",
        f'<text x="{label_w}" y="{head + 20}" class="label">← focus lower</text>',
        f'<text x="{label_w + plot_w}" y="{head + 20}" class="label" text-anchor="end">focus higher →</text>',
        f'<text x="{label_w + plot_w + 10}" y="{head + 20}" class="label">peeval ± 95 % · paper · verdict</text>',
    ]
    for i, c in enumerate(rows):
        row_h = heights[i]
        y = top + sum(heights[:i]) + row_h / 2
        d, pd = _num(c["peeval_value"]), _num(c.get("paper_value"))
        hw = half_width(c.get("stderr"), c.get("df"))
        reach = max(abs(d) + (hw or 0.0), abs(pd) if pd is not None else 0.0) or 1.0
        scale = (plot_w / 2 - 8) / (reach * 1.05)
        cls = VERDICT_CLASS.get(str(c["verdict"]), "unk")
        if i % 2:
            out.append(f'<rect x="0" y="{y - row_h / 2:.1f}" width="{width}" height="{row_h}" class="band"/>')
        hover = f"{c['compared']} · {c['task']} ({c['claim_id']})"  # with the claim's id
        first = y + 4 - line_h * (len(labels[i]) - 1) / 2
        lines = "".join(f'<tspan x="4" dy="{0 if k == 0 else line_h}">{escape(line)}</tspan>'
                        for k, line in enumerate(labels[i]))  # fmt: skip
        out.append(f'<text x="4" y="{first:.1f}" class="rowlabel"><title>{escape(hover)}</title>{lines}</text>')
        out.append(f'<line x1="{x0}" x2="{x0}" y1="{y - row_h / 2:.1f}" y2="{y + row_h / 2:.1f}" class="zero"/>')
        if hw is not None:
            a, b = x0 + (d - hw) * scale, x0 + (d + hw) * scale
            out.append(f'<line x1="{a:.1f}" x2="{b:.1f}" y1="{y:.1f}" y2="{y:.1f}" class="ci {cls}"/>')
        if pd is not None:
            px = x0 + pd * scale
            diamond = f"M{px:.1f} {y - 6:.1f}L{px + 5:.1f} {y:.1f}L{px:.1f} {y + 6:.1f}L{px - 5:.1f} {y:.1f}Z"
            out.append(f'<path d="{diamond}" class="paper"><title>paper: {escape(fmt_number(pd))}</title></path>')
        tip = f"peeval: {fmt_number(d)}" + (f" ± {fmt_number(hw, 2)} (95 %)" if hw is not None else ", no interval")
        out.append(f'<circle cx="{x0 + d * scale:.1f}" cy="{y:.1f}" r="4.5" class="mark {cls}">'
                   f"<title>{escape(tip)}</title></circle>")  # fmt: skip
        text = f"{fmt_number(d)}" + (f" ± {fmt_number(hw, 2)}" if hw is not None else " (no interval)")
        text += f" · paper {fmt_number(pd)} · {c['verdict']}"
        out.append(f'<text x="{label_w + plot_w + 10}" y="{y + 4:.1f}" class="rowtext">{escape(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def distinguish(claims: list[dict]) -> list[str]:
    """Each claim's name as a row shows it, ``compared · task``, and where two rows would read alike, what differs
    between them: the metric (TAPE's three "tape vs no-eq · peeval_shift_stability" rows), else the claim (CoPE's
    counting with 1, 3 and 5 variables)."""
    names = [f"{c['compared']} · {c['task']}" for c in claims]
    for key in ("metric", "claim_id"):
        alike: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            alike.setdefault(name, []).append(i)
        for rows in alike.values():
            said = [str(claims[j].get(key, "")).split(":", 1)[0] for j in rows]  # a claim: its id without the pair
            if len(set(said)) > 1:
                for j, what in zip(rows, said, strict=True):
                    names[j] += f" · {what}"
    return names


def paper_summary(state: dict[str, list]) -> list[tuple[str, str, int]]:
    """One paper's answer in one line, (words, css class, count): reproduced, contradicted, inconclusive (with the
    pairs that hold at initialisation), not decidable (not learned, no contrast, not decidable here), not measured;
    every count shown, zero included."""
    n = {k: len(v) for k, v in state.items()}
    out = [("reproduced", "ok", n["reproduced"]), ("contradicted", "bad", n["contradicted"]),
           ("inconclusive", "unk", n["inconclusive"])]  # fmt: skip
    if n[AT_INIT]:
        out.append((AT_INIT, "ai", n[AT_INIT]))
    parts = [f"{n[k]} {k}" for k in UNDECIDABLE if n[k]]
    words = f"not decidable ({', '.join(parts)})" if parts else "not decidable"
    out.append((words, "nd", sum(n[k] for k in UNDECIDABLE)))
    out.append(("not measured", "nm", n["not measured"]))
    return out


def shown_task(task: str, run_ids: list[str], labels: dict[tuple[str, str], str]) -> str:
    """A claim's task with what its runs read (``labels``: (run_id, task) -> ``peeval.records.task_label``), so
    that a claim judged on the mirror's stand-in for a corpus never reads as one on the corpus itself."""
    read = list(dict.fromkeys(labels[(r, task)] for r in run_ids if (r, task) in labels))
    return " / ".join(lab if lab.startswith(task) else f"{task} · {lab}" for lab in read) or task


def render_claims_page(
    con, labels: dict[tuple[str, str], str] | None = None, hidden: frozenset[str] = frozenset()
) -> str | None:
    """The site's claims page (leaderboard/site/templates/claims.html) for the ``claims`` table, or None when
    there is none. ``labels``: what each (run, task) read, as the site names it (:func:`shown_task`); ``hidden``:
    pages the navigation leaves out (``pages.nav``)."""
    if not _has(con, "claims"):
        return None
    claims = _rows(con, "SELECT * FROM claims ORDER BY claim_id")
    for c in claims:
        c["task"] = shown_task(str(c["task"]), _run_ids(c["run_ids"]), labels or {})
    values: dict[str, list[dict]] = {}
    if _has(con, "claim_values"):
        for v in _rows(con, "SELECT * FROM claim_values"):
            values.setdefault(str(v["claim_id"]), []).append(v)
    counts = [(k, cls, sum(c["verdict"] == k for c in claims), VERDICT_MEANING[k]) for k, cls in VERDICT_CLASS.items()]
    # the registration of each profile's families against its data (issue 67 item 4; registration.board_rows)
    reg = _rows(con, "SELECT * FROM claims_registration") if _has(con, "claims_registration") else []
    registered = {str(r["profile"]): str(r["line"]) for r in reg}
    papers = []
    for paper in sorted({str(c["paper"]) for c in claims}, key=lambda p: (PAPER_ORDER + (p,)).index(p)):
        mine = [c for c in claims if str(c["paper"]) == paper]
        shown = dict(zip((id(c) for c in mine), distinguish(mine), strict=True))
        state = {k: [_row(c, values, shown[id(c)]) for c in mine if c["verdict"] == k] for k in VERDICT_CLASS}
        decided = [r for k in DECIDED for r in state[k]]
        # an unknown word: shown, last
        other = [_row(c, values, shown[id(c)]) for c in mine if c["verdict"] not in VERDICT_CLASS]
        measured = [c for c in mine if c["verdict"] in (*DECIDED, "inconclusive")]
        measured.sort(key=lambda c: list(VERDICT_CLASS).index(c["verdict"]))
        answer = [(k, VERDICT_CLASS[k], len(state[k])) for k in VERDICT_CLASS if state[k]]
        forest = forest_svg(measured, f"{paper}: peeval's differences beside the paper's")
        fam = sorted({(str(c["family"]), int(c["family_m"]), registered.get(str(c["family"]).rsplit(" @ ", 1)[-1], ""))
                      for c in mine if c.get("family") and c.get("family_m")})  # fmt: skip
        papers.append({"name": paper, "answer": answer, "decided": decided, "family": fam,
                       "summary": paper_summary(state),
                       "inconclusive": state["inconclusive"] + state[AT_INIT] + other,
                       "undecidable": state["not decidable here"],
                       "unlearned": state["not learned at this scale"], "flat": state["no contrast at this setting"],
                       "not_measured": state["not measured"],
                       "forest": pages.Markup(forest)})  # fmt: skip
    sens = _rows(con, "SELECT * FROM claims_sensitivity") if _has(con, "claims_sensitivity") else []
    aa = _aa_rows(_rows(con, "SELECT * FROM claims_calibration") if _has(con, "claims_calibration") else [], sens)
    for r in aa:
        r["decides_text"] = aa_decides(r)
    lines = {str(s["claim_id"]): sensitivity_line(s) for s in sens}
    for p in papers:
        for r in p["decided"]:
            r["sensitivity"] = lines.get(r["claim_id"], "")
    return pages.render("claims.html", title="claims: the papers' headline results, measured by peeval", prefix="",
                        links=pages.nav(True, hidden), counts=counts, papers=papers, aa=aa, scale=SCALE,
                        fold=FOLD_PAIRS)  # fmt: skip


def aa_decides(row: dict, alpha: float = ALPHA) -> str:
    """The A/A table's "decides" cell: ``yes`` only where the rejection rate's interval lies below ``alpha`` (the
    test shown calibrated); ``no`` where it lies above or the test is retired; else the comparisons are too few
    to show it either way (the cpu board's 6 read "yes")."""
    if not row.get("used", True) or str(row["test"]).endswith("(retired)"):
        return "no (retired)"
    n, lo, hi = row["groups"], row["lo"], row["hi"]
    if n and lo > alpha:
        return f"no: rejects identical setups beyond {alpha:g}"
    if n and hi < alpha:
        return "yes"
    return f"not shown: {n} comparison{'s' if n != 1 else ''}, interval {lo:.2f}–{hi:.2f} includes {alpha:g}"


def _aa_rows(aa: list[dict], sens: list[dict]) -> list[dict]:
    """The A/A table's rows as shown: a test over runs whose split could not be made (no group of >= 4 runs) is
    replaced by the simulated calibration at each decided pair's own spreads (issue 67), which says so."""
    out = []
    for r in aa:
        if r["test"] == "runs-t" and not r["groups"] and sens:
            for s in sens:
                what = (f"no A/A split (no group of >= 4 runs): {s['draws']:,} simulated nulls at "
                        f"{s['claim_id']}'s spreads ({s['n_focus']} vs {s['n_other']} runs)")  # fmt: skip
                out.append({"test": "runs-t (Welch), simulated", "compared": what, "groups": s["draws"],
                            "rejections": round(s["welch_rate"] * s["draws"]), "rate_text": f"{s['welch_rate']:.3f}",
                            "interval": f"{s['welch_lo']:.3f}–{s['welch_hi']:.3f}", "lo": s["welch_lo"],
                            "hi": s["welch_hi"], "used": True, "decides": r["decides"]})  # fmt: skip
            continue
        r["rate_text"] = "—" if r["rate"] is None else f"{r['rate']:.3f}"
        r["interval"] = f"{r['lo']:.3f}–{r['hi']:.3f}"
        if r["test"] == "runs-t" and not r["groups"]:
            r["compared"] += " (no group of >= 4 runs: no split can be made, and no pair is decided to simulate)"
        out.append(r)
    return out


#: what a verdict at this scale can and cannot mean (the claims page and the front page say it in one sentence)
SCALE = ("A verdict here says whether tiny models (about 0.1-0.4M parameters, 3-5 training runs an encoding) trained "
         "on CPU show the paper's difference beyond their seed-to-seed spread; it cannot say whether the paper's "
         "result holds at the paper's size.")  # fmt: skip
