"""Reading a DuckDB store in a test: open read-only, query, close (a held connection locks the file)."""

import duckdb


def query(db, sql: str, params=None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()
