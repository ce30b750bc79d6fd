"""peeval leaderboard, one package per part (the layer table that opens docs/design.md says which may import which):
the store (``store/``: its format, schema.sql, read-only connections), its writer (``ingest/``, one parser per
input), the claims and their verdicts (``claims/``, claims.yaml), the static site (``site/``: every page, its
templates and charts) and ``publish.py`` (a profile's results committed under ``published/``); ``_cli.py`` is the
one way their ``python -m`` commands end."""
