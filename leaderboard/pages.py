"""The site's page templates (leaderboard/templates/): one base page (head, header, navigation) that every
page of the site fills and the claims page extends. Jinja2 with autoescaping on: a text from the store is
escaped unless the code marks it as already-built HTML (``Markup``)."""

from __future__ import annotations

from pathlib import Path

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).with_name("templates")
ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def nav(claims: bool) -> list[tuple[str, str]]:
    """The navigation's (href, text) links (leaderboard/site/registry.py, the site's pages in order); the claims
    page's only when there is one."""
    from leaderboard.site import registry  # here: the site package imports this module

    return registry.nav(claims)


def render(template: str, **context) -> str:
    """A template of leaderboard/templates/ filled with ``context`` (every value escaped unless ``Markup``)."""
    return ENV.get_template(template).render(**context)


__all__ = ["ENV", "Markup", "nav", "render"]
