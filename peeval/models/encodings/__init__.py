"""Registry of positional encodings, keyed by ``config.pe``.

Adding an encoding = one new module here + one line in ``ENCODINGS``.
Modules are imported lazily so that importing peeval stays cheap.
"""

from __future__ import annotations

import importlib

from .base import Encoding, Option, PEContext

ENCODINGS: dict[str, str] = {
    "nope": "base:Encoding",
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


__all__ = ["ENCODINGS", "Encoding", "Option", "PEContext", "build_encoding", "get_encoding_class"]
