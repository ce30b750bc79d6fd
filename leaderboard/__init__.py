"""peeval leaderboard: the store (store.py, schema.sql), its writer (the package ingest/, one parser per input) and
the static site builder (the package site/, one module per page; its templates pages.py + templates/, the claims
page claims_page.py)."""
