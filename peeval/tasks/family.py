"""A task family's declaration (``Family``, ``SitePage``) and the lookups over the registered families: defined in
``peeval.records.families`` (the records read the families' grammar, and the task modules import the records, so
the type lives beside them); each ``peeval/tasks/<family>/family.py`` imports it from here."""

from peeval.records.families import Family, SitePage, families, family_of

__all__ = ["Family", "SitePage", "families", "family_of"]
