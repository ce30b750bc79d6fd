"""peeval's declared names, one torch-free module: encodings, attention back-ends, adaptation methods, the papers
whose claims peeval checks, and its task families and tasks.

The torch modules import their tables from here (``peeval.models.encodings``, ``configuration_peeval``,
``llama_adapters``, the SCROLLS and diagnostic tasks), and the light readers (the ``.pth`` hook, the CLI's
choices, the claims checker, the parameter files' checks) read the same objects without importing torch, so no
reader parses another module's source. Stdlib only: importing this imports nothing else.

Adding an encoding = one module under ``peeval/models/encodings`` + one line in :data:`ENCODINGS`
(tests/pipeline/test_adding_an_encoding.py); tests/test_registry.py checks both directions.

As a package it also owns ``declarations.py``: the registry's names and each encoding's ``pe_options``
defaults (read from its module's source with ast) for the readers that import no torch. Row 0 of the layer table
(docs/design.md): the standard library only; every other package may import it.
"""

from __future__ import annotations

from typing import NamedTuple

#: positional encodings, keyed by ``config.pe``: ``<module under peeval.models.encodings>:<class>``
ENCODINGS: dict[str, str] = {
    "nope": "base:NoPE",
    "learned": "absolute:LearnedPE",
    "sinusoidal": "absolute:SinusoidalPE",
    "rope": "rope:RoPE",
    "alibi": "alibi:ALiBi",
    "xpos": "xpos:XPos",
    "fire": "fire:FIRE",
    "t5": "t5:T5Bias",
    "kerple": "kerple:Kerple",
    "randpe": "randpe:RandPE",
    "cope": "cope:CoPE",
    "pope": "pope:PoPE",
    "tape": "tape:TAPE",
}

#: attention back-ends (``config.attn_backend``; ``peeval.models.attention.BACKENDS`` runs them)
ATTN_BACKENDS: tuple[str, ...] = ("sdpa", "eager", "flash", "triton", "flex", "blocked", "recompute")

#: how the loss meets lm_head (``config.linear_loss``; ``peeval.models.linear_loss`` computes them)
LINEAR_LOSSES: tuple[str, ...] = ("logits", "chunked", "liger")

#: context-extension methods of ``peeval adapt`` (``peeval.models.llama_adapters``)
ADAPT_METHODS: tuple[str, ...] = ("tape", "tape_pi", "lora", "theta", "pi", "yarn")


class Paper(NamedTuple):
    """A paper whose headline claims peeval checks (leaderboard/claims/claims.yaml's ``paper`` field is ``short``)."""

    short: str
    title: str
    url: str


PAPERS: tuple[Paper, ...] = (
    Paper("TAPE", "Rethinking Addressing in Language Models via Contextualized Equivariant Positional Encoding",
          "https://arxiv.org/abs/2501.00712"),
    Paper("CoPE", "Contextual Position Encoding: Learning to Count What's Important", "https://arxiv.org/abs/2405.18719"),
    Paper("PoPE", "Decoupling the \u201cWhat\u201d and \u201cWhere\u201d With Polar Coordinate Positional Embeddings",
          "https://arxiv.org/abs/2509.10534"),
)  # fmt: skip

#: task families: a folder under ``peeval/tasks`` -> what its tasks measure (each folder is listed once)
TASK_FAMILIES: dict[str, str] = {
    "ppl": "perplexity of long documents by context length (peeval_ppl_<corpus>)",
    "passkey": "passkey retrieval by length and depth (peeval_passkey)",
    "diagnostics": "synthetic diagnostics of position use (peeval_diag_<task>_<split>)",
    "scrolls": "SCROLLS long-document tasks (peeval_scrolls_<task>)",
    "cbt": "Children's Book Test cloze (peeval_cbt_<cn|ne>)",
    "hellaswag": "HellaSwag, read from the mirror (peeval_hellaswag)",
    "groups": "the papers' suites (peeval_zeroshot, peeval_tape_suite)",
    "ruler": "lm-eval's RULER needle-in-a-haystack tasks with synthetic haystacks, by context length",
}

#: the diagnostic generators (``peeval.tasks.diagnostics.generators.TASKS``)
DIAG_TASKS: tuple[str, ...] = ("indirect_indexing", "flip_flop", "selective_copy", "counting", "addition")
#: the generators' size sets (``generators.params(profile=...)``, a diag profile's ``gen_profile``,
#: params.yaml ``diagnostics.eval.profile``): not the training profiles of peeval.training.profiles
GEN_PROFILES: tuple[str, ...] = ("cpu", "paper")

#: SCROLLS tasks: name -> (metric kind, whether ``input`` starts with a query) (``peeval.tasks.scrolls.scrolls``)
SCROLLS_TASKS: dict[str, tuple[str, bool]] = {
    "qasper": ("f1", True),
    "narrative_qa": ("f1", True),
    "quality": ("em", True),
    "contract_nli": ("em", True),
    "qmsum": ("rouge", True),
    "summ_screen_fd": ("rouge", False),
    "gov_report": ("rouge", False),
}


def encoding_names() -> list[str]:
    """The keys of :data:`ENCODINGS`, in order (what ``--pe`` accepts)."""
    return list(ENCODINGS)


__all__ = [
    "ADAPT_METHODS",
    "ATTN_BACKENDS",
    "DIAG_TASKS",
    "ENCODINGS",
    "GEN_PROFILES",
    "LINEAR_LOSSES",
    "PAPERS",
    "SCROLLS_TASKS",
    "TASK_FAMILIES",
    "Paper",
    "encoding_names",
]
