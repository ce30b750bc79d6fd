"""lm-eval's RULER needle-in-a-haystack tasks whose haystacks are synthetic, so they run offline: ``niah_single_1``
(the "repeat" haystack, one sentence over and over) and ``niah_multikey_2`` / ``niah_multikey_3`` (haystacks of
other needles). The essay haystacks of the other ``niah_*`` tasks download Paul Graham's essays: not these.

Run them as any lm-eval task, on a peeval checkpoint or a hub model (e.g. SmolLM2)::

    peeval eval --model peeval --model_args pretrained=<checkpoint> --tasks niah_single_1 \\
        --metadata '{"max_seq_lengths": [512, 1024]}'
    lm_eval --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M --tasks niah_single_1 \\
        --metadata '{"max_seq_lengths": [2048, 4096]}'

``max_seq_lengths`` are the context lengths, counted in the tokens of ``tokenizer`` (else the model's
``pretrained``: a peeval checkpoint carries its tokenizer). lm-eval names each metric by its length (``"4096"``,
the share of needles recalled) and reports -1 at the default lengths it did not run: those are no cells.
Needs the ``ruler`` extra (nltk, wonderwords); the repeat and needle haystacks never read nltk's punkt, whose
download lm-eval tries at import and which fails soft offline.
"""

from __future__ import annotations

from peeval.tasks.family import Family, SitePage

TASKS = ("niah_single_1", "niah_multikey_2", "niah_multikey_3")


def parse_length(metric: str) -> tuple[int] | None:
    """``"4096"`` -> (4096,); None for another metric."""
    return (int(metric),) if metric.isascii() and metric.isdigit() else None


def length_metric(length: int) -> str:
    """4096 -> ``"4096"``: lm-eval's RULER names a metric by its context length."""
    return str(length)


def _check_cell(metric: str, where: str) -> None:
    if parse_length(metric) is not None and int(metric) < 1:
        raise ValueError(f"{where}: the length must be a whole number >= 1")


_NAMES = ", ".join(f"'{t}'" for t in TASKS)
#: RULER's rows: a length's score where the run had samples of that length (-1: none); n is NULL: lm-eval counts
#: the documents of a task, not of a length (its n-samples would say every length scored them all)
CELLS = (
    "(SELECT run_id, task, CAST(metric AS INTEGER) AS length, value, NULL::BIGINT AS n FROM metrics "
    f"WHERE filter = 'none' AND task IN ({_NAMES}) AND regexp_matches(metric, '^[0-9]+$') AND value >= 0)"
)

FAMILY = Family(
    name="ruler",
    tasks=TASKS,
    metadata_keys=("max_seq_lengths", "tokenizer"),
    reports=lambda task: "<L>, the share of needles recalled at context length L (max_seq_lengths)",
    is_metric=lambda task, metric: parse_length(metric) is not None,
    parse_cell=parse_length,
    format_cell=length_metric,
    check_cell=_check_cell,
    generated=True,
    page=SitePage(
        "ruler.html",
        "RULER",
        view=CELLS,
        title="RULER needle in a haystack vs context length",
        ylabel="needles recalled",
        note="lm-eval's RULER tasks with synthetic haystacks (niah_single_1: a repeated sentence; "
        "niah_multikey_2/3: other needles), scored by lm-eval (share of the needle's values in "
        "the answer), averaged over runs of the same name.",
    ),  # fmt: skip
    board=lambda metrics: [],  # its cells are lengths: drawn on its page, no leaderboard column
    length_cells=True,
    cell_length=lambda metric: p[0] if (p := parse_length(metric)) else None,
    tokenizer_key="tokenizer",
    lm_eval_dirs=("ruler",),
)
