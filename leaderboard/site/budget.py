"""The front page's first line: the training length and the budget every encoding of a source got."""

from __future__ import annotations

from leaderboard.site.context import SiteStore
from peeval.records import LOCAL_SOURCE


def _span(xs, f=lambda v: f"{v:,}") -> str:
    return "–" if not xs else f(xs[0]) if xs[0] == xs[-1] else f"{f(xs[0])}–{f(xs[-1])}"


def budget_line(store: SiteStore, train_len: int | None, longest: int | None,
                source: str = LOCAL_SOURCE) -> tuple[str, str]:  # fmt: skip
    """One line: the training length and the budget every encoding of ``source`` got (runs and efficiency), as
    (the pretraining scale, the diagnostics' budgets and the lengths read)."""
    pre = store.view("pretrain_budget", "source = ? AND size IS NULL", [source])  # the profile's shape, no rung
    bits = [f"Pretrained at context length {train_len:,} tokens" if train_len else "Training length unknown"]
    if pre:
        names = sorted({r["name"] for r in pre})
        params = sorted({r["params"] for r in pre if r["params"]})
        steps = sorted({r["steps"] for r in pre if r["steps"] is not None})
        toks = sorted({r["tokens"] for r in pre if r["tokens"] is not None})
        seeds = max(len({r["seed"] for r in pre if r["name"] == n}) for n in names)
        # the scale a reader needs before any verdict: training tokens per parameter (Hoffmann et al.'s ~20
        # is compute-optimal; the claims stage decides no language-model claim below it)
        per = sorted({r["tokens"] / r["params"] for r in pre if r["tokens"] and r["params"]})
        per_text = f" ({_span(per, lambda v: f'{v:.2f}')} tokens per parameter)" if per else ""
        size = _span(params, lambda v: f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v:,}")
        bits.append(
            f"{len(names)} encodings, each {size} parameters, "
            f"{_span(toks)} training tokens in {_span(steps)} steps{per_text}, {seeds} seed{'s' if seeds > 1 else ''}"
        )
    for d in store.view("diagnostic_budget", "source = ?", [source], order="task"):
        bits.append(f"{d['task']}: {d['pes']}, {d['s']:,} steps ({d['t']:,} tokens), {d['k']} seeds")
    if longest and train_len:
        bits.append(f"perplexity up to {longest:,} tokens ({longest / train_len:g}× the training length)")
    head = 2 if pre else 1
    return " · ".join(bits[:head]), " · ".join(bits[head:])
