"""The "Claims" page: each paper's headline results next to peeval's measurement and a verdict.

``render_claims_page(con)`` returns the page (leaderboard/templates/claims.html, which extends the
site's base page; no script, no network) from the ``claims`` and ``claim_values`` tables that
``pipelines/claims.py`` writes, or None when there is no ``claims`` table yet. The site builder
(leaderboard/site.py) writes it as ``claims.html`` beside ``runs/<run_id>.html``, which the run links
point to. Every string from the store is escaped (the templates autoescape).
"""

from __future__ import annotations

import json
from typing import Any

from leaderboard import pages
from peeval.records import fmt_number

PAPER_ORDER = ("PoPE", "CoPE", "TAPE")
VERDICT_CLASS = {"reproduced": "ok", "contradicted": "bad", "inconclusive": "unk"}


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


def _row(c: dict, values: dict[str, list[dict]]) -> dict:
    """What the template shows of one ``claims`` row (texts; the template escapes them)."""
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
            "paper_diff": fmt_number(c["paper_value"]), "diff": diff, "test": str(c.get("test") or "—"),
            "n": fmt_number(c["n"]), "seeds": fmt_number(c["seeds"]), "verdict": verdict,
            "cls": VERDICT_CLASS.get(verdict, "unk"), "setting": str(c["setting_diff"] or ""),
            "run_ids": _run_ids(c["run_ids"])}  # fmt: skip


def render_claims_page(con) -> str | None:
    """The site's claims page (leaderboard/templates/claims.html) for the ``claims`` table, or None when
    there is none."""
    if not _has(con, "claims"):
        return None
    claims = _rows(con, "SELECT * FROM claims ORDER BY claim_id")
    values: dict[str, list[dict]] = {}
    if _has(con, "claim_values"):
        for v in _rows(con, "SELECT * FROM claim_values"):
            values.setdefault(str(v["claim_id"]), []).append(v)
    counts = [(k, cls, sum(c["verdict"] == k for c in claims)) for k, cls in VERDICT_CLASS.items()]
    papers = []
    for paper in sorted({str(c["paper"]) for c in claims}, key=lambda p: (PAPER_ORDER + (p,)).index(p)):
        mine = [c for c in claims if str(c["paper"]) == paper]
        mine.sort(key=lambda c: list(VERDICT_CLASS).index(c["verdict"]) if c["verdict"] in VERDICT_CLASS else 3)
        papers.append((paper, [_row(c, values) for c in mine]))  # decided verdicts first, each in claim-id order
    return pages.render("claims.html", title="claims: the papers' headline results, measured by peeval", prefix="",
                        links=pages.nav(True), counts=counts, papers=papers)  # fmt: skip
