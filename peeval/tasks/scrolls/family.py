"""The SCROLLS family: ``peeval_scrolls_<task>`` reports lm-eval's em / f1 / ROUGE as percents (their names:
``peeval.records.metrics``; which one a task reports: ``peeval.registry.SCROLLS_TASKS``)."""

from __future__ import annotations

from peeval.records.names import SCROLLS_PREFIX
from peeval.tasks.family import Family

FAMILY = Family(name="scrolls", prefix=SCROLLS_PREFIX.rstrip("_"), metadata_keys=("scrolls_task", "hub_copy"))
