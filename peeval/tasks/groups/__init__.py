"""Suites of the papers' tables: ``peeval_zeroshot`` (PoPE table 5) and ``peeval_tape_suite``
(TAPE table 9). ``BUILTIN_DIRS`` names the lm-eval task folders each suite's built-in members
live in, so that ``peeval eval`` can index just those (plain ``lm_eval`` indexes everything)."""

from __future__ import annotations

BUILTIN_DIRS: dict[str, tuple[str, ...]] = {
    "peeval_zeroshot": ("lambada", "blimp", "hellaswag", "piqa", "arc"),
    "peeval_tape_suite": ("mmlu/default", "arc"),
}


def builtin_dirs(names: list[str]) -> list[str]:
    """Absolute lm-eval task folders needed by the peeval suites among ``names``."""
    wanted = [d for n in names for d in BUILTIN_DIRS.get(n, ())]
    if not wanted:
        return []
    import os

    import lm_eval.tasks

    root = os.path.dirname(lm_eval.tasks.__file__)
    return [os.path.join(root, d) for d in dict.fromkeys(wanted)]
