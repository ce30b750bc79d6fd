"""A task family as a plugin: each folder under ``peeval/tasks`` declares one :class:`Family` (its ``family.py``,
``FAMILY = Family(...)``) and ``peeval.registry.TASK_FAMILIES`` lists the folders, so records, metadata_keys,
ingest, the store's views, the site and the claims loop over :func:`families` instead of branching on task names.

A family module stays light (stdlib and ``peeval.records`` / ``peeval.registry`` only, never lm-eval or torch):
the readers import every family, and the task modules import metadata_keys, which reads the families.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SitePage:
    """The page a family adds to the site (``leaderboard.site.pages.PAGES`` puts it in the navigation in the
    families' order). ``module``: the ``leaderboard.site`` module that draws it; None: the site's generic page
    (``leaderboard.site.by_length``), a chart per task with one line per name of its score against the context
    length, read from ``view``: the name of a store view or a parenthesised SELECT over the store with the
    columns run_id, task, length, value, n (``leaderboard.store`` unites them as ``family_length_cells``)."""

    href: str
    text: str
    module: str | None = None
    view: str = ""
    title: str = ""
    note: str = ""
    ylabel: str = ""


@dataclass(frozen=True)
class Family:
    """One task family. Task names: ``tasks`` (exact names, as lm-eval's own tasks) or ``prefix`` (``<prefix>_*``).

    ``metadata_keys``: the task metadata keys its tasks read (None: peeval's metadata check does not apply);
    ``more_keys``: keys read from elsewhere, loaded late (the diagnostic generators' parameters).
    The metric and cell grammar: ``reports(task)`` says in words what a task reports (None: the family formats
    no metric names of its own), ``is_metric(task, metric)`` whether a metric is one of those;
    ``parse_cell(metric)`` -> the cell (a length, a length and a depth, ...) or None, ``format_cell(*cell)``
    its inverse; ``check_cell(metric, where)`` raises ValueError naming ``where`` when a cell is no cell.
    ``infinite_cells``: a cell may be +inf (a model that explodes). ``generated``: the data is peeval's own
    generator's, never read (the site names its tasks by task name). ``tier``: the board's column order.
    ``sql_names``: the ``{NAME}`` s of schema.sql it fills; ``views``: the schema.sql views that read its cells.
    ``page``: its site page (a generic page's rows: ``SitePage.view``); ``board``: the board columns of a task
    given its metrics (None: the headline metric).
    ``length_cells``: its cells are context lengths (a claim may read ``beyond_window``); ``cell_length(metric)``:
    the length a cell was measured at (the claims' ``measured_length``). ``tokenizer_key``: the metadata key
    through which its tasks count prompt tokens with the model's own tokenizer (the pipeline fills it in).
    ``lm_eval_dirs``: the folders under ``lm_eval/tasks`` that hold its tasks (lm-eval's own families: ``peeval
    eval`` indexes just those, never a copy of their YAML)."""

    name: str
    prefix: str = ""
    tasks: tuple[str, ...] = ()
    metadata_keys: tuple[str, ...] | None = None
    more_keys: Callable[[], set[str]] | None = None
    reports: Callable[[str], str] | None = None
    is_metric: Callable[[str, str], bool] | None = None
    parse_cell: Callable[[str], tuple | None] | None = None
    format_cell: Callable[..., str] | None = None
    check_cell: Callable[[str, str], None] | None = None
    infinite_cells: bool = False
    generated: bool = False
    tier: int = 3
    sql_names: tuple[tuple[str, str], ...] = ()
    views: tuple[str, ...] = ()
    page: SitePage | None = None
    board: Callable[[set[str]], list[str]] | None = None
    length_cells: bool = False
    cell_length: Callable[[str], int | None] | None = None
    tokenizer_key: str | None = None
    lm_eval_dirs: tuple[str, ...] = ()

    def owns(self, task: str) -> bool:
        """Whether ``task`` is one of this family's."""
        return task in self.tasks or (bool(self.prefix) and (task == self.prefix or task.startswith(self.prefix + "_")))

    @property
    def pattern(self) -> str:
        """Its task names as a reader writes them (``peeval_ppl_*``, ``peeval_passkey``)."""
        return ", ".join(self.tasks) if self.tasks else f"{self.prefix}_*"


@functools.cache
def families() -> tuple[Family, ...]:
    """Every registered family (``peeval.registry.TASK_FAMILIES``), in the registry's order."""
    from peeval.registry import TASK_FAMILIES

    out = []
    for name in TASK_FAMILIES:
        fam = importlib.import_module(f"peeval.tasks.{name}.family").FAMILY
        if not isinstance(fam, Family) or fam.name != name:
            raise TypeError(f"peeval/tasks/{name}/family.py: FAMILY must be a Family named {name!r}")
        out.append(fam)
    return tuple(out)


def family_of(task: str) -> Family | None:
    """The family ``task`` belongs to, None for a task of none."""
    return next((f for f in families() if f.owns(task)), None)


__all__ = ["Family", "SitePage", "families", "family_of"]
