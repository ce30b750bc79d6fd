"""peeval leaderboard: DuckDB ingest (ingest.py, schema.sql) and the static site builder (the package site/, one
module per page; its templates pages.py + templates/, the claims page claims_page.py)."""
