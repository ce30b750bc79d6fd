"""The claims page (:mod:`leaderboard.site.claims_page`, from the claims stage's database when there is one, else from
the store's claims tables); no page when there is no claims table."""

from __future__ import annotations

from leaderboard.site.context import Page, SiteStore

TITLE = "claims: the papers' headline results, measured by peeval"


def render(store: SiteStore) -> Page | None:
    return Page("claims.html", TITLE, store.claims_html) if store.claims_html else None
