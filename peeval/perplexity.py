"""The perplexity-by-length protocols as token plans: which windows one (document, length) row of
``peeval_ppl_*`` forwards and which of their tokens it scores. Pure Python (no torch): the task
describes a row, the model wrapper (``peeval.harness.plugin``) tokenizes the document, asks this
module for the plan and runs it, so the task and every model class read one definition.

``targets`` (the default): each document gets one run of ``targets_per_doc`` consecutive target
tokens at a seeded place past its front matter (at least ``skip`` tokens in, and far enough in that
the longest window fits before it). For every length L the same targets are scored: the run is cut
from its end into blocks of at most L // 2 tokens, and each block is scored by one forward over the
L tokens that end at the block's end, so every target is predicted from L − block .. L − 1 tokens
of context. Only the context grows with L; the text scored is identical at every length.

``windows``: disjoint windows of exactly L tokens from the document's first token (every predicted
token scored, L − 1 per window), or with ``stride`` < L the sliding protocol (each token scored once,
by the first window that reaches it, with up to L − 1 tokens of context). Here the text scored
differs between lengths (longer windows reach further into the document).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PROTOCOLS = ("targets", "windows")


@dataclass(frozen=True)
class Window:
    """One forward: the document's tokens ``[start, end)``; its last ``scored`` tokens are the targets
    (each predicted from the window's tokens before it)."""

    start: int
    end: int
    scored: int

    @property
    def length(self) -> int:
        return self.end - self.start


def target_span(n_tokens: int, *, per_doc: int, skip: int, longest: int, seed: int, doc_id: int) -> tuple[int, int]:
    """The document's target run ``[start, start + per_doc)``: uniform (seeded by ``seed`` and the
    document's index) among the places at least ``skip`` tokens in and ``longest − 1`` tokens in (so
    that the window of the longest length ending at the run's first target fits in the document).
    The same for every length: the run depends on the longest length, never on the one scored."""
    lo = max(skip, longest - 1)
    hi = n_tokens - per_doc
    if hi < lo:
        raise ValueError(
            f"peeval_ppl document {doc_id}: {n_tokens} tokens, but the targets protocol needs "
            f"{lo + per_doc} ({per_doc} targets after max(skip={skip}, longest length {longest} - 1) tokens): "
            "use fewer targets, a smaller skip or shorter lengths"
        )
    # a str seed is hashed with sha512 by random.Random: the same place in every process and Python
    start = random.Random(f"peeval_ppl targets {seed} {doc_id}").randint(lo, hi)
    return start, start + per_doc


def target_windows(span: tuple[int, int], length: int) -> list[Window]:
    """The forwards that score the targets ``span`` at context length ``length``: blocks of at most
    ``length // 2`` targets, cut from the run's end, each scored by the ``length`` tokens ending at its end."""
    start, end = span
    if length < 2:
        raise ValueError(f"peeval_ppl length {length}: must be >= 2")
    if start < length - 1:
        raise ValueError(f"peeval_ppl targets at token {start}: a window of {length} tokens does not fit before them")
    block = max(1, min(end - start, length // 2))
    out, e = [], end
    while e > start:
        k = min(block, e - start)
        out.append(Window(e - length, e, k))
        e -= k
    return out[::-1]


def disjoint_windows(n_tokens: int, length: int, stride: int | None = None, max_windows: int = 0) -> list[Window]:
    """The ``windows`` protocol: windows of ``length`` tokens every ``stride`` (default: ``length``,
    disjoint) from token 0; the first scores all its L − 1 predicted tokens, a later one only the tokens no
    earlier window scored. At most ``max_windows`` (0: all); a remainder shorter than L is dropped."""
    stride = stride or length
    if length < 2 or not 1 <= stride <= length or max_windows < 0:
        raise ValueError(f"peeval window L={length}, stride={stride}, max_windows={max_windows}: need L >= 2, "
                         "1 <= stride <= L, max_windows >= 0")  # fmt: skip
    starts = range(0, n_tokens - length + 1, stride)
    if max_windows:
        starts = starts[:max_windows]
    return [Window(s, s + length, length - 1 if s == 0 or stride >= length else stride) for s in starts]


def bucket_starts(longest: int, buckets: int) -> list[int]:
    """The first context size of each of ``buckets`` equal position buckets of a ``longest``-token window
    (target position p, i.e. p tokens of context, falls in bucket ``p * buckets // longest``)."""
    n = max(1, min(buckets, longest // 2))  # >= 2 positions a bucket: bucket 0 holds position 1
    return [-(-b * longest // n) for b in range(n)]


#: encodings whose positions are rows of a fixed table: a window longer than the table has no row to read
TABLE_ENCODINGS = ("learned",)
#: the key of a scored row (lm_eval_plugin's ``score_rows``) that has no cell: its length is past the table
NOT_APPLICABLE = "not_applicable"


def lengths_past_table(model, lengths: set[int]) -> dict[int, str]:
    """The lengths a model cannot read because its learned position table ends before them, each with
    the reason: such a cell is "not applicable" (no cell is written), not an error that stops the whole
    length sweep and not a number read from rows that do not exist. Other models: {}."""
    pe = getattr(getattr(model, "model", None), "pe", None)
    if getattr(pe, "name", None) not in TABLE_ENCODINGS:
        return {}
    rows = pe.wpe.num_embeddings
    return {L: f"pe='{pe.name}' has a {rows}-row position table: no row for length {L}" for L in lengths if rows < L}


def exceeds(longest: int, max_length: int) -> str:
    """The one line for a perplexity length the model's ``max_length`` cannot hold (the plugin's scoring, ``peeval
    eval`` and plain ``lm_eval`` say the same)."""
    return (f"peeval_ppl length {longest} exceeds the model's max_length={max_length}: set model_args max_length >= "
            f"{longest} (beyond the training length is allowed: extrapolation is what is measured), or leave that "
            "length out")  # fmt: skip
