"""The "Claims" page: each paper's headline results next to peeval's measurement and a verdict.

``render_claims_page(con)`` returns one self-contained HTML page (inline CSS, no script, no
network) from the ``claims`` and ``claim_values`` tables that ``pipelines/claims.py`` writes,
or None when there is no ``claims`` table yet. The site builder (leaderboard/site.py) writes
it as ``claims.html`` beside ``runs/<run_id>.html``, which the run links point to. Every
string from the store is escaped.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from peeval.records import fmt_number

PAPER_ORDER = ("PoPE", "CoPE", "TAPE")
VERDICT_CLASS = {"reproduced": "ok", "contradicted": "bad", "inconclusive": "unk"}

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;max-width:120rem}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem;width:100%}
th,td{border:1px solid #ccc;padding:.3rem .45rem;vertical-align:top;text-align:left}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ok{background:#d9f2d9}.bad{background:#f8d7d7}.unk{background:#f2f2f2}
.verdict{font-weight:600;white-space:nowrap}.small{font-size:.78rem;color:#555}
.summary span{margin-right:1.2rem}
"""


def _rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _has(con, table: str) -> bool:
    q = "SELECT count(*) FROM information_schema.tables WHERE table_name = ?"
    return bool(con.execute(q, [table]).fetchone()[0])


def _run_links(raw: Any) -> str:
    try:
        ids = json.loads(raw) if isinstance(raw, str) else list(raw or [])
    except (TypeError, ValueError):
        ids = []
    if not ids:
        return '<span class="small">no runs</span>'
    return " ".join(f'<a href="runs/{escape(str(i), quote=True)}.html">{escape(str(i))}</a>' for i in ids)


def _values_cell(vals: list[dict], side: str) -> str:
    """'tape 32.82 · rope 26.32' (paper) or with ± stderr and seeds (peeval)."""
    parts = []
    for v in vals:
        name = escape(str(v["variant"]))
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
        parts.append(f"{name} {escape(num)}")
    return "<br>".join(parts)


def render_claims_page(con) -> str | None:
    """A full HTML page for the ``claims`` table, or None when there is none."""
    if not _has(con, "claims"):
        return None
    claims = _rows(con, "SELECT * FROM claims ORDER BY claim_id")
    values: dict[str, list[dict]] = {}
    if _has(con, "claim_values"):
        for v in _rows(con, "SELECT * FROM claim_values"):
            values.setdefault(str(v["claim_id"]), []).append(v)
    counts = {k: sum(c["verdict"] == k for c in claims) for k in VERDICT_CLASS}
    body = [
        "<h1>Claims · the papers' headline results, measured by peeval</h1>",
        "<p>One row per comparison the paper makes (its focus encoding against each other one). "
        "<b>reproduced</b>: peeval's difference has the paper's direction and exceeds twice its "
        "standard error; <b>contradicted</b>: the opposite direction beyond the same margin; "
        "<b>inconclusive</b>: neither, or a number is missing. The standard error is across seeds "
        "when there are several, else lm-eval's (or the binomial one for accuracies); where both encodings "
        "answered the same examples the difference is <b>paired</b> instead: <b>mcnemar</b> (one seed each: "
        "exact test of the examples one got right and the other wrong, decided at p &lt; 0.0455, the level of "
        "two standard errors) or <b>paired-se</b> (several seeds: the standard error of the per-example "
        "differences over seed pairs and examples). The <b>test</b> column says which. Differences are "
        "focus − other in the paper's unit. The setting column says how peeval's run differs from "
        "the paper's: read verdicts of tiny CPU models accordingly.</p>",
        '<p class="summary">'
        + "".join(f'<span class="{VERDICT_CLASS[k]}">{escape(k)}: {n}</span>' for k, n in counts.items())
        + "</p>",
    ]
    papers = sorted({str(c["paper"]) for c in claims}, key=lambda p: (PAPER_ORDER + (p,)).index(p))
    for paper in papers:
        body.append(f'<h2 id="{escape(paper, quote=True)}">{escape(paper)}</h2>')
        body.append(
            "<table><thead><tr><th>claim</th><th>ref</th><th>task · metric</th><th>compared</th>"
            "<th>paper</th><th>peeval</th><th>paper diff</th><th>peeval diff ± se</th><th>test</th><th>n</th>"
            "<th>seeds</th><th>verdict</th><th>setting difference</th><th>runs</th></tr></thead><tbody>"
        )
        mine = [c for c in claims if str(c["paper"]) == paper]
        mine.sort(key=lambda c: list(VERDICT_CLASS).index(c["verdict"]) if c["verdict"] in VERDICT_CLASS else 3)
        for c in mine:  # decided verdicts first, each group in claim-id order
            base_id = str(c["claim_id"]).split(":", 1)[0]
            focus, _, other = str(c["compared"]).partition(" vs ")
            vals = [v for v in values.get(base_id, []) if str(v["variant"]) in (focus, other)]
            vals.sort(key=lambda v: str(v["variant"]) != focus)
            diff = fmt_number(c["peeval_value"])
            if c["peeval_value"] is not None and c["stderr"] is not None:
                diff += f" ± {fmt_number(c['stderr'], 2)}"
            verdict = str(c["verdict"])
            cls = VERDICT_CLASS.get(verdict, "unk")
            body.append(
                f'<tr id="{escape(str(c["claim_id"]), quote=True)}">'
                f"<td>{escape(str(c['claim_id']))}</td><td>{escape(str(c['ref']))}</td>"
                f"<td>{escape(str(c['task']))}<br><span class='small'>{escape(str(c['metric']))}</span></td>"
                f"<td>{escape(str(c['compared']))}</td>"
                f"<td class='num'>{_values_cell(vals, 'paper')}</td><td class='num'>{_values_cell(vals, 'peeval')}</td>"
                f"<td class='num'>{escape(fmt_number(c['paper_value']))}</td><td class='num'>{escape(diff)}</td>"
                f"<td class='small'>{escape(str(c.get('test') or '—'))}</td>"
                f"<td class='num'>{escape(fmt_number(c['n']))}</td>"
                f"<td class='num'>{escape(fmt_number(c['seeds']))}</td>"
                f'<td class="verdict {cls}">{escape(verdict)}</td>'
                f"<td class='small'>{escape(str(c['setting_diff'] or ''))}</td>"
                f"<td class='small'>{_run_links(c['run_ids'])}</td></tr>"
            )
        body.append("</tbody></table>")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Claims · peeval</title>'
        '<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,">'
        f"<style>{CSS}</style></head><body>"
        '<nav><a href="index.html">← Leaderboard</a></nav>' + "".join(body) + "</body></html>"
    )
