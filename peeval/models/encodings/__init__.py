"""Registry of positional encodings, keyed by ``config.pe``.

Adding an encoding = one new module here + one line in ``ENCODINGS``: the model, the
back-ends, randpe's bases (``Encoding.reads_positions``), ``peeval train --pe`` and the
lm-eval model ``peeval-<name>`` all read this table. Modules are imported lazily so that
importing peeval stays cheap; the table itself is read without importing torch too
(``peeval/_lm_eval_hook.py``), so it stays a literal.
"""

from __future__ import annotations

import importlib

from .base import ContentBias, Encoding, Option, PEContext, PositionBias

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


def get_encoding_class(pe: str) -> type[Encoding]:
    if pe not in ENCODINGS:
        raise ValueError(f"unknown pe {pe!r}; known encodings: {', '.join(ENCODINGS)}")
    module, cls = ENCODINGS[pe].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def build_encoding(config) -> Encoding:
    return get_encoding_class(config.pe)(config)


__all__ = [
    "ENCODINGS",
    "ContentBias",
    "Encoding",
    "Option",
    "PEContext",
    "PositionBias",
    "build_encoding",
    "get_encoding_class",
]
