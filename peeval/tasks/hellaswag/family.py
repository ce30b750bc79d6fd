"""The HellaSwag family: ``peeval_hellaswag``, read from the mirror (no metadata keys, no cells)."""

from __future__ import annotations

from peeval.tasks.family import Family

FAMILY = Family(name="hellaswag", prefix="peeval_hellaswag", tasks=("peeval_hellaswag",), metadata_keys=())
