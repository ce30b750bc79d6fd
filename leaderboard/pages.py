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
#: every page of the site, in the navigation's order (claims.html only when there is a claims table)
NAV = (("index.html", "Leaderboard"), ("ppl.html", "Perplexity"), ("passkey.html", "Passkey"),
       ("diagnostics.html", "Diagnostics"), ("training.html", "Training"), ("efficiency.html", "Efficiency"),
       ("claims.html", "Claims"), ("compare.html", "Compare"), ("data.html", "Data"))  # fmt: skip


def nav(claims: bool) -> list[tuple[str, str]]:
    """The navigation's (href, text) links; the claims page's only when there is one."""
    return [(href, text) for href, text in NAV if claims or href != "claims.html"]


def render(template: str, **context) -> str:
    """A template of leaderboard/templates/ filled with ``context`` (every value escaped unless ``Markup``)."""
    return ENV.get_template(template).render(**context)


__all__ = ["ENV", "NAV", "Markup", "nav", "render"]
