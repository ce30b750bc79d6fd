"""The compare page's verdict: the board's own test between the rows two runs belong to. A difference between two
runs is judged the way the front page judges it (:func:`leaderboard.site.front.compare`: the mean over each row's
training seeds, a Welch interval over seeds), never by an interval over documents or examples of one run each: the
claims page's A/A check showed such a per-document interval rejects most pairs of identical setups (issue 68 item 4).
A pair of rows with one seed on either side gets no interval and is said to be one that cannot be judged."""

from __future__ import annotations

import itertools
import math

from leaderboard.site import front
from leaderboard.site.context import SiteStore
from leaderboard.site.index import front_columns
from leaderboard.site.stats import board

#: the runs the board compares: the encodings trained here or published (their seeds are a row's seeds)
KINDS = ("pretrain", "diagnostic")


def row_pairs(store: SiteStore) -> dict:
    """``rows``: run_id -> the board row (name) whose seeds it is; ``seeds``: per pair of rows of one board (same
    source and size, key ``"<a>|<b>"``, a < b) each headline column both ran: A's number against B's as the front
    page computes it (``kind`` ppl: the ratio A ÷ B and its interval; acc: the difference A − B), the seeds on each
    side and the outcome from A's side (``win``: A better beyond the interval, ``loss``, ``within noise``,
    ``no interval``)."""
    b = board(store, KINDS)
    cols = front_columns(b)
    where = {str(r["name"]): (r["source"], r["size"]) for r in store.view("name_sources")}
    runs = {name: {c.label: [front.Run(v[0], v[1], v[2], v[5], v[4]) for v in by.get(c.label, [])] for c in cols}
            for name, by in b.cells.items()}  # fmt: skip
    rows = {v[4]: name for name, by in b.cells.items() for vals in by.values() for v in vals}
    seeds: dict[str, list[dict]] = {}
    for a, z in itertools.combinations(sorted(runs), 2):
        if where.get(a) != where.get(z):  # another board: another budget or tokenizer, no shared test
            continue
        got = []
        for c in cols:
            vc = front.compare(c, runs[a][c.label], runs[z][c.label])
            if vc is None:
                continue
            d = vc.diff
            lo, hi = (None, None) if d is None else (d.lo, d.hi)
            if c.kind == "ppl" and d is not None:
                lo, hi = math.exp(lo), math.exp(hi)
            got.append({"label": c.label, "kind": c.kind, "value": vc.sort, "lo": lo, "hi": hi,
                        "a_seeds": _seeds(runs[a][c.label]), "b_seeds": _seeds(runs[z][c.label]),
                        "outcome": vc.outcome})  # fmt: skip
        if got:
            seeds[f"{a}|{z}"] = got
    return {"rows": rows, "seeds": seeds}


def _seeds(runs: list[front.Run]) -> int:
    return sum(1 for r in runs if r.value is not None and math.isfinite(r.value))


def tape_vs_rope(runs: list[dict], rows: dict[str, str], ppl_pairs: dict) -> tuple[str, str] | None:
    """The pair the compare page opens on: TAPE against RoPE (the board's baseline) of one board, their lowest
    seed both scored on the same documents, so the page opens on the question the front page answers."""
    name = {r["run_id"]: r["name"] for r in runs}
    seed = {r["run_id"]: r["seed"] for r in runs}
    found = []
    for key in ppl_pairs:
        x, y = key.split("|")
        for t, r in ((x, y), (y, x)):
            nt, nr = rows.get(t), rows.get(r)
            same_board = nt and nr and nt.split(" ", 1)[0] == "tape" and nr == front.BASELINE + nt[len("tape") :]
            if same_board and seed.get(t) == seed.get(r) and name.get(t) == nt:
                found.append((seed[t] if seed[t] is not None else math.inf, nt, t, r))
    return min(found)[2:] if found else None
