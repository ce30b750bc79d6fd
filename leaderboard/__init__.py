"""peeval leaderboard: DuckDB ingest (ingest.py, schema.sql) and the static site builder (site.py)."""
