"""Issue 56: a data lock listing the sha256 of a halved copy of a folder made it "verified", and evaluations cited
the manifest's pinned commit for it. A pinned commit's files are what the manifest pins; the lock speaks for a
folder on a moving revision (main), and for the files only it knows (``lock_only``)."""

import hashlib

from peeval.data.sources import problems_in

FULL, HALF = b"0123456789abcdef", b"01234567"


def _entry(revision: str) -> dict:
    sha = hashlib.sha256(FULL).hexdigest()
    return {"source": {"repo_id": "org/ds", "revision": revision, "files": {}, "lock_only": ["README.md"]},
            "files": {"data.txt": {"bytes": len(FULL), "sha256": sha}}}  # fmt: skip


def test_the_manifests_pins_outrank_the_data_lock(tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "data.txt").write_bytes(HALF)  # the halved copy
    lock = {"files": {"data.txt": {"bytes": len(HALF), "sha256": hashlib.sha256(HALF).hexdigest()}}}
    pinned = problems_in(tmp_path, "f", _entry("a" * 40), lock)
    assert len(pinned) == 1 and "data lock's record does not replace the pin" in pinned[0], pinned
    assert problems_in(tmp_path, "f", _entry("main"), lock) == []  # a moving revision: what the lock recorded
    (tmp_path / "f" / "data.txt").write_bytes(FULL)
    assert problems_in(tmp_path, "f", _entry("a" * 40), lock) == []


def test_a_lock_never_vouches_for_rows_other_than_the_pinned_ones(tmp_path):
    """A hub folder on a moving revision is verified by its rows (rows_sha256): a halved copy is not those rows,
    whatever sha256 the lock lists for it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from peeval.data.rebuild import rows_sha256

    rows = [{"q": f"question {i}", "a": i} for i in range(4)]
    (tmp_path / "f").mkdir()
    p = tmp_path / "f" / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows[:2]), p)  # half the rows
    entry = {"source": {"repo_id": "org/ds", "revision": "main", "files": {}, "lock_only": ["README.md"]},
             "files": {"test.parquet": {"bytes": 1, "sha256": "0" * 64, "rows_sha256": rows_sha256(rows)}}}  # fmt: skip
    lock = {"files": {"test.parquet": {"bytes": p.stat().st_size, "sha256": _sha(p)}}}
    found = problems_in(tmp_path, "f", entry, lock)
    assert len(found) == 1 and "rows differ from the manifest's pinned rows_sha256" in found[0], found
    pq.write_table(pa.Table.from_pylist(rows), p)  # all of them, other bytes than the manifest's: the lock's record
    lock["files"]["test.parquet"] = {"bytes": p.stat().st_size, "sha256": _sha(p)}
    assert problems_in(tmp_path, "f", entry, lock) == []


def _sha(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_lock_that_is_a_folder_or_malformed_is_one_line(tmp_path, monkeypatch):
    """`PEEVAL_DATA_LOCK` naming a folder was ignored (every download then unrecorded); a malformed entry was a
    TypeError deep in the verification."""
    import json

    import pytest

    from peeval.data import lock as data_lock

    monkeypatch.setenv("PEEVAL_DATA_LOCK", str(tmp_path))
    with pytest.raises(data_lock.DataError, match="is a folder"):
        data_lock.read_lock()
    lock = tmp_path / "lock.json"
    monkeypatch.setenv("PEEVAL_DATA_LOCK", str(lock))
    for entry, field in (({"files": {"a": 5}}, "files"), ({"inputs": [1]}, "inputs"), ("x", "an object"),
                         ({"files": {"a": {"bytes": "8", "sha256": "ab"}}}, "files")):  # fmt: skip
        lock.write_text(json.dumps({"format": 1, "folders": {"local/x": entry}}))
        with pytest.raises(data_lock.DataError, match=field):
            data_lock.read_lock()
