"""peeval leaderboard: DuckDB ingest (ingest/, store.py, schema.sql) and the static site builder (site.py, its page
templates pages.py + templates/, the claims page claims_page.py)."""
