"""The glossary page: the site's terms (``ppl ÷ RoPE``, Welch df, within noise, rung, ...), one anchor each, so a
page links a term to its meaning the first time it uses it (``glossary.html#<anchor>``)."""

from __future__ import annotations

from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import page

#: (anchor, term, meaning): what the pages say, in the words they say it
TERMS = (
    (
        "ppl",
        "perplexity (ppl)",
        "exp of the mean negative log-likelihood per token of the model's own tokenizer on fixed target tokens; lower "
        "is better. ppl@L: with L tokens of context (the same target tokens at every L: only the context grows).",
    ),
    (
        "ppl-ratio",
        "ppl ÷ RoPE",
        "an encoding's perplexity divided by RoPE's, both of one profile and source, the geometric mean over seeds "
        "(a ratio of means of log-perplexity). ×0.8: 20 % lower than RoPE's; below ×1 is better. The front page's "
        "picture draws it with its interval: a dot left of the dashed ×1 line, with a whisker clear of it, is a win.",
    ),
    (
        "in-distribution",
        "in distribution / 16× train",
        "at the context length the model was trained at (in distribution), or at a multiple of it (16× train: 4,096 "
        "tokens for a model trained at 256): beyond the window training ever showed it.",
    ),
    (
        "interval",
        "95 % interval (CI)",
        "the range that holds the true difference in 95 of 100 repetitions of the experiment, from the spread over "
        "seeds (training runs), not over documents: a different seed is a different model.",
    ),
    (
        "welch",
        "Welch df",
        "the degrees of freedom of Welch's t interval, which does not assume both sides vary alike (Welch-"
        "Satterthwaite). 3 seeds a side give 2 to 4 df: a wide t quantile (4.3 at 2 df against 1.96 for a normal), so "
        "small samples give honest, wide intervals.",
    ),
    (
        "within-noise",
        "within noise",
        "the interval includes parity (×1, or a difference of 0): the data cannot tell the two apart at this number of "
        "seeds, whatever the sign of the point estimate. Never coloured.",
    ),
    (
        "no-interval",
        "no interval",
        "one seed on a side, so no spread to build an interval from: a number, not a comparison.",
    ),
    (
        "win",
        "win / loss",
        "the interval excludes parity on the encoding's side (win, green) or RoPE's (loss, red). 'Wins vs RoPE' counts "
        "only these.",
    ),
    (
        "seeds",
        "seeds",
        "independent training runs of one configuration that differ only in their random seed; the unit the "
        "intervals and the claims' tests are computed over.",
    ),
    (
        "rung",
        "rung (ladder of sizes)",
        "a model shape of the ladder of sizes (e.g. 4×32: 4 layers, width 32), trained with the same data and steps "
        "as every encoding of that rung; rows named 'rope [4x32]'. The Sizes page compares each encoding with the RoPE "
        "of its own rung.",
    ),
    (
        "tokens-per-parameter",
        "tokens per parameter",
        "training tokens ÷ model parameters. Below 20 (Hoffmann et al.'s compute-optimal ratio) a language-model claim "
        "is 'not decidable at this scale'.",
    ),
    (
        "bpb",
        "bits per byte (bpb)",
        "the loss in bits per byte of text: it does not depend on the tokenizer, so models with different tokenizers "
        "are compared in bpb, never in perplexity.",
    ),
    (
        "profile",
        "profile, @profile",
        "a size preset of the whole pipeline (smoke, cpu, cpu-claims, gpu, paper). A row named 'tape @cpu' is a "
        "published result of the cpu profile, run on the machine its page names.",
    ),
    (
        "yours",
        "yours",
        "a run you added to a published board (make site MINE=...): a row of its own, never a seed of a published "
        "row; shown with its size, training length and tokenizer, since it need not share the profile's budget.",
    ),
    (
        "verdicts",
        "reproduced / contradicted / inconclusive / not decidable / not measured",
        "the claims page's answers to each paper's headline result; how they are decided: the claims page and "
        "docs/statistics.md.",
    ),
    (
        "holm",
        "Holm p",
        "a p-value adjusted for testing many pairs at once (Holm's step-down method), so the chance of any false "
        "'reproduced' or 'contradicted' among them stays under 5 %.",
    ),
)


def render(store: SiteStore) -> Page:
    return page(store, "glossary.html", "glossary", "glossary.html", terms=TERMS)


def markdown() -> str:
    """docs/glossary.md: the same terms for readers of the repository (``python -m leaderboard.site.glossary``
    writes it; tests/test_docs_commands.py fails when it is stale)."""
    lines = ["# Glossary", "", "The terms of the leaderboard site (its glossary page), generated from",
             "`leaderboard/site/glossary.py` by `python -m leaderboard.site.glossary`.", ""]  # fmt: skip
    for _anchor, term, meaning in TERMS:
        lines += [f"## {term}", "", meaning, ""]
    return "\n".join(lines)


if __name__ == "__main__":
    from pathlib import Path

    out = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"
    out.write_text(markdown(), encoding="utf-8")
    print(f"glossary: {out}")
