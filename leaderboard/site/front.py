"""The front page's answer: each encoding against RoPE (the baseline every paper compares with), column by
column, with the interval the runs justify and nothing more; a summary that counts only what an interval decides.

Pure functions of per-run numbers (no store, no HTML), so each rule is tested on its own:

- perplexity: the ratio ppl_X / ppl_RoPE; with >= 2 seeds on both sides a Welch interval on log ppl
  (``peeval.records.welch_difference``), else the cell says why there is none ("1 seed, 1,020 scored tokens:
  no interval") and the ratio stands alone;
- an accuracy: the difference X - RoPE with its Welch interval (both sides >= 2 seeds) or, both sides one run
  with a standard error over examples, the normal one; seeds on each side are stated;
- outcome of a cell (:attr:`VsCell.outcome`): a ``win`` or a ``loss`` only when its interval excludes parity
  (ratio 1, difference 0); an interval that includes parity is ``within noise`` and a cell without an interval
  (one seed, no standard error) is ``no interval``, whatever the sign of the point estimate;
- wins (:func:`win_rate`): over the columns where both have a number, the wins and losses counted from those
  outcomes only, with how many columns are within noise or have no interval. There is no mean rank: the encodings
  ran different columns (pope 3, rope 10 on cpu-claims), and a rank averaged over different columns compares
  nothing.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from peeval import registry
from peeval.records import fmt_number
from peeval.records.stats import Difference, SeedEstimate, seed_estimate, welch_difference

#: the baseline every comparison on the front page is against
BASELINE = "rope"
#: (short name, title, arXiv address) of the papers whose claims peeval checks (``peeval.registry``'s)
PAPERS = registry.PAPERS
#: interval level of every difference shown
LEVEL = 0.95


@dataclass
class Run:
    """One run's number in a column: value, its own stderr (over examples), examples, scored tokens, id."""

    value: float
    stderr: float | None = None
    n: int | None = None
    tokens: int | None = None
    run_id: str = ""


@dataclass
class Column:
    """A headline column: ``kind`` 'ppl' (lower is better, compared as a ratio) or 'acc' (a share of examples,
    higher is better, compared as a difference); ``length`` the context length of a perplexity column."""

    task: str
    metric: str
    label: str
    kind: str
    length: int | None = None

    @property
    def lower(self) -> bool:
        return self.kind == "ppl"


@dataclass
class VsCell:
    """One encoding against the baseline in one column."""

    text: str  # the ratio or difference
    sub: str  # its support: the interval and seeds, or why there is no interval
    better: bool | None  # the point estimate is on X's side (None: a tie or no number); decides nothing alone
    beyond: bool = False  # the interval excludes "no difference", on X's side when better
    sort: float | None = None
    diff: Difference | None = None
    claims: list[tuple[str, str]] = field(default_factory=list)  # (claim_id, verdict) resting on these runs

    @property
    def outcome(self) -> str:
        """``win`` / ``loss``: the interval excludes parity on X's side / the baseline's; ``within noise``: it
        includes parity; ``no interval``: there is none (the sign of the point estimate decides nothing)."""
        if self.diff is None:
            return "no interval"
        if not self.beyond or self.better is None:
            return "within noise"
        return "win" if self.better else "loss"


def _tokens(runs: list[Run]) -> str:
    """The scored tokens behind each run's perplexity (every run of a cell)."""
    toks = sorted({r.tokens for r in runs if r.tokens is not None})
    if not toks:
        return "scored tokens unknown"
    return f"{toks[0]:,} tokens each" if len(toks) == 1 else f"{toks[0]:,}–{toks[-1]:,} tokens each"


def _finite(runs: list[Run]) -> list[Run]:
    return [r for r in runs if r.value is not None and math.isfinite(r.value)]


def compare(col: Column, x: list[Run], base: list[Run]) -> VsCell | None:
    """X against the baseline in ``col``; None when either side has no finite number."""
    x, base = _finite(x), _finite(base)
    if not x or not base:
        return None
    seeds = f"{len(x)} vs {len(base)} seeds" if (len(x), len(base)) != (1, 1) else "1 seed each"
    if col.kind == "ppl":
        if any(r.value <= 0 for r in x + base):
            return None
        ex = seed_estimate([(math.log(r.value), None, r.n) for r in x], proportion=False)
        eb = seed_estimate([(math.log(r.value), None, r.n) for r in base], proportion=False)
        ratio = math.exp(ex.value - eb.value)
        better = None if ratio == 1 else ratio < 1
        d = welch_difference(ex, eb, LEVEL) if len(x) >= 2 and len(base) >= 2 else None
        if d is None:
            sub = f"{seeds}, {_tokens(x + base)}: no interval"
            return VsCell(f"×{ratio:.3f}", sub, better, False, ratio)
        lo, hi = math.exp(d.lo), math.exp(d.hi)
        beyond = hi < 1 or lo > 1
        sub = f"{int(LEVEL * 100)}% CI ×{lo:.3f} to ×{hi:.3f}; {seeds}, Welch df {d.df:.1f}"
        return VsCell(f"×{ratio:.3f}", sub, better, beyond, ratio, d)
    ex = seed_estimate([(r.value, r.stderr, r.n) for r in x], proportion=True)
    eb = seed_estimate([(r.value, r.stderr, r.n) for r in base], proportion=True)
    d = welch_difference(ex, eb, LEVEL)
    diff = ex.value - eb.value
    better = None if diff == 0 else diff > 0
    text = f"{diff:+.3f}"
    if d is None:
        return VsCell(text, f"{seeds}: no interval (seed spread on one side only)", better, False, diff)
    how = f"Welch df {d.df:.1f}" if math.isfinite(d.df) else "normal, over examples"
    sub = f"{int(LEVEL * 100)}% CI {d.lo:+.3f} to {d.hi:+.3f}; {seeds}, {how}"
    return VsCell(text, sub, better, d.lo > 0 or d.hi < 0, diff, d)


def estimate(col: Column, runs: list[Run]) -> SeedEstimate | None:
    """The column's one number over a name's runs (the leaderboard's mean ± stderr)."""
    runs = _finite(runs)
    if not runs:
        return None
    return seed_estimate([(r.value, r.stderr, r.n) for r in runs], proportion=col.kind == "acc")


@dataclass
class WinRate:
    wins: int  # intervals that exclude parity on X's side
    losses: int  # ... on the baseline's side
    noise: int  # intervals that include parity
    no_interval: int  # no interval at all
    compared: int

    @property
    def text(self) -> str:
        if not self.compared:
            return "–"
        return f"{self.wins} won, {self.losses} lost"

    @property
    def sub(self) -> str:
        if not self.compared:
            return "no column in common with RoPE"
        return (f"of {self.compared} column{'s' if self.compared != 1 else ''}: {self.noise} within noise, "
                f"{self.no_interval} no interval")  # fmt: skip


def win_rate(cells: list[VsCell | None]) -> WinRate:
    """Over the columns where both have a number: the wins and losses an interval decides, and the rest."""
    done = [c.outcome for c in cells if c is not None]
    return WinRate(done.count("win"), done.count("loss"), done.count("within noise"), done.count("no interval"),
                   len(done))  # fmt: skip


def detectable(cells: list[VsCell | None]) -> float | None:
    """The smallest ratio a perplexity column's seeds can tell from parity: exp of the median half-width of its
    cells' intervals on log perplexity (a ratio nearer ×1 than that, at this seed spread, reads within noise).
    None when no cell has an interval."""
    halves = [(c.diff.hi - c.diff.lo) / 2 for c in cells if c is not None and c.diff is not None]
    return math.exp(statistics.median(halves)) if halves else None


def ratio_words(ratio: float, lo: float | None, hi: float | None, outcome: str) -> str:
    """A ratio as the front page's text says it: ``×1.31 (interval ×0.93–×1.85, within noise)``; ``better`` /
    ``worse`` than RoPE where the interval clears ×1."""
    said = {"win": "better", "loss": "worse"}.get(outcome, outcome)
    if lo is None or hi is None:
        return f"×{ratio:.2f} ({said})"
    return f"×{ratio:.2f} (interval ×{lo:.2f}–×{hi:.2f}, {said})"


__all__ = ["BASELINE", "LEVEL", "PAPERS", "Column", "Run", "VsCell", "WinRate", "compare", "detectable", "estimate",
           "fmt_number", "ratio_words", "win_rate"]  # fmt: skip
