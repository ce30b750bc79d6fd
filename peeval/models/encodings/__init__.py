"""Registry of positional encodings, keyed by ``config.pe``.

Adding an encoding = one new module here + one line in ``peeval.registry.ENCODINGS`` (a torch-free module,
so the ``.pth`` hook, the CLI and the claims read the same table without importing torch): the model, the
back-ends, randpe's bases (``Encoding.reads_positions``), ``peeval train --pe`` and the lm-eval model
``peeval-<name>`` all read it. Modules are imported lazily so that importing peeval stays cheap.
"""

from __future__ import annotations

import importlib

from ...registry import ENCODINGS
from .base import ContentBias, Encoding, Option, PEContext, PositionBias


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
