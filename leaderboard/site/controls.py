"""The runs' untrained step-0 controls (issue 67) on the front page: each is its encoding's initial weights, a
reference for what training added, never an encoding. So they stay out of the picture, out of "each encoding
against RoPE", out of the encodings' table and out of every count ("N of M encodings", the budget line), and are
shown in a band of their own below the answer, marked as controls."""

from __future__ import annotations

from leaderboard.ingest.results import STEP0_SUFFIX
from leaderboard.site.stats import Board


def is_control(name: str) -> bool:
    """A step-0 control's row (``<enc> untrained (step 0)``, with `` @<profile>`` when published)."""
    return STEP0_SUFFIX in str(name)


def split(b: Board) -> tuple[Board, Board]:
    """``b`` as (its trained rows, its controls' rows); the controls' board keeps only the columns they have."""

    def rows(d: dict, controls: bool) -> dict:
        return {n: v for n, v in d.items() if is_control(n) == controls}

    def part(controls: bool) -> Board:
        stats = rows(b.stats, controls)
        used = [i for i, lab in enumerate(b.labels) if any(lab in s for s in stats.values())]
        labels = [b.labels[i] for i in used]
        return Board(labels, [b.lower[i] for i in used], rows(b.cells, controls),
                     {lab: b.chosen[lab] for lab in labels}, stats)  # fmt: skip

    if not any(is_control(n) for n in b.cells):  # no controls: the board as it is, every column kept
        return b, Board([], [], {}, {})
    return part(False), part(True)
