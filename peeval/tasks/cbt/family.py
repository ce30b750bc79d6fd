"""The Children's Book Test family: ``peeval_cbt_<cn|ne>``, cloze accuracy (no metadata keys, no cells)."""

from __future__ import annotations

from peeval.tasks.family import Family

FAMILY = Family(name="cbt", prefix="peeval_cbt", metadata_keys=())
