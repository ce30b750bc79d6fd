"""The papers' suites (``peeval_zeroshot``, ``peeval_tape_suite``): groups of lm-eval's own tasks, whose
members report under their own names (no metadata keys of peeval's, no cells)."""

from __future__ import annotations

from peeval.tasks.family import Family

FAMILY = Family(name="groups", tasks=("peeval_zeroshot", "peeval_tape_suite"))
