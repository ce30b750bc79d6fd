"""The claims package as its own room: torch-free declarations equal to the registry's, the claims
tables defined only in leaderboard/store/schema.sql, the `claims` stage writing its own database (the
store is read, never written) and the site reading it beside the store."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml
from helpers.claims import CLAIM

from leaderboard.store import schema_sql  # the store's schema: schema.sql with peeval.records' names

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- declarations without torch
def test_declarations_read_without_torch_equal_the_registry():
    from peeval.models.encodings import ENCODINGS, get_encoding_class
    from peeval.models.llama_adapters import METHODS
    from peeval.registry import declarations as D
    from peeval.tasks.scrolls.scrolls import TASKS

    assert D.encoding_names() == list(ENCODINGS)
    for pe in ENCODINGS:
        assert D.encoding_option_defaults(pe) == {k: o.default for k, o in get_encoding_class(pe).options.items()}, pe
    assert D.adapt_methods() == tuple(METHODS)
    assert D.scrolls_metric_kinds() == {k: v[0] for k, v in TASKS.items()}


def test_declarations_by_hand():
    """Written from the source, not from the reader: an own dict, a subclass with its own options
    (xpos, not rope's), options inherited through two bases (alibi -> DistanceBias -> Encoding)."""
    from peeval.registry import declarations as D

    assert D.encoding_option_defaults("pope") == {"delta_init": "zero", "softplus": True, "delta": True}
    assert D.encoding_option_defaults("xpos") == {"scale_base": 512}
    assert D.encoding_option_defaults("alibi") == {} and D.encoding_option_defaults("rope") == {}
    assert D.encoding_option_defaults("tape")["position_size"] is None
    d = D.encoding_option_defaults("cope")
    d["npos_max"] = -1  # a copy: the cache is not the caller's to change
    assert D.encoding_option_defaults("cope")["npos_max"] == 64
    with pytest.raises(D.DeclarationError, match="unknown pe 'rpoe'"):
        D.encoding_option_defaults("rpoe")


def test_leaderboard_imports_no_torch():
    """The claims checker and the site run in the light `claims` / `site` stages."""
    code = (
        "import sys\n"
        "import leaderboard.claims as C, leaderboard.site, leaderboard.site.claims_page\n"
        "import leaderboard.claims.schema as S\n"
        "S.lm_eval_task_names = lambda: frozenset()\n"  # lm-eval's index is lm-eval's business
        "claims = C.load_claims()\n"
        "rows, values, _ = C.evaluate_claims(claims, C.read_store(__import__('duckdb').connect()))\n"
        "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
        "print(len(rows), heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    env = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr


# --------------------------------------------------------------------------- one schema
def _columns(con, table: str) -> list[tuple[str, str]]:
    q = "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position"
    return con.execute(q, [table]).fetchall()


def test_schema_sql_is_the_only_ddl_of_the_claims_tables():
    from leaderboard import claims as C

    src = "\n".join(p.read_text() for p in (ROOT / "leaderboard" / "claims").glob("*.py"))
    assert not re.search(r"claim_id\s+VARCHAR|_DDL\s*=", src, flags=re.IGNORECASE)
    ref = duckdb.connect()
    ref.execute(schema_sql())
    con = duckdb.connect()
    C.write_claims(con, [], [])
    assert sorted(C.TABLES) == sorted(
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    )
    for t in C.TABLES:
        assert _columns(con, t) == _columns(ref, t) and _columns(ref, t), t
    # by hand, the columns the claims page reads
    assert dict(_columns(ref, "claims"))["run_ids"] == "JSON"
    assert [c for c, _ in _columns(ref, "claim_values")] == [
        "claim_id", "variant", "encoding", "paper_value", "paper_std", "peeval_value", "stderr", "n", "seeds",
        "run_ids"]  # fmt: skip


# --------------------------------------------------------------------------- the stage and the site
def _store(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute(schema_sql())
    for s, (a, b) in enumerate([(0.93, 0.10), (0.95, 0.12), (0.97, 0.11)]):
        for rid, pe, acc in ((f"pope{s}", "pope", a), (f"rope{s}", "rope", b)):
            con.execute(
                "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date) "
                "VALUES (?, ?, 'diagnostic', ?, ?, '{}', '{}', ?, TIMESTAMP '2026-11-22 20:00:00')",
                [rid, pe, f"ck/{rid}", pe, s],
            )
            con.execute(
                "INSERT INTO metrics VALUES (?, 'peeval_diag_indirect_indexing_test', 'acc', 'none', ?, 0.01, 500)",
                [rid, acc],
            )
    con.close()
    return path


def _stage():
    import importlib.util

    spec = importlib.util.spec_from_file_location("claims_stage", ROOT / "pipelines" / "claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    return stage


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_stage_writes_its_own_database_and_the_site_reads_it(tmp_path, capsys):
    from leaderboard.site import build_site

    db = _store(tmp_path / "peeval.duckdb")
    good = tmp_path / "claims.yaml"
    good.write_text(yaml.safe_dump({"claims": [CLAIM], "families": {"cpu": ["ii:a-vs-b"]}}))  # params.yaml: cpu
    store_before = _sha(db)
    summary = tmp_path / "claims_summary.json"
    assert _stage().main(["--db", str(db), "--claims", str(good), "--summary", str(summary)]) == 0
    assert _sha(db) == store_before  # ingest's output is only read
    out = tmp_path / "claims.duckdb"  # default: beside the store
    con = duckdb.connect(str(out), read_only=True)
    assert con.execute("SELECT claim_id, verdict, seeds FROM claims").fetchall() == [("ii:a-vs-b", "reproduced", 3)]
    assert con.execute("SELECT variant FROM claim_values ORDER BY variant").fetchall() == [("a",), ("b",)]
    con.close()
    want = {"comparisons": 1, "reproduced": 1, "contradicted": 0, "inconclusive": 0,
            "holds at initialisation (architecture)": 0, "not learned at this scale": 0,
            "no contrast at this setting": 0, "not decidable here": 0, "not measured": 0}  # fmt: skip
    assert json.loads(summary.read_text()) == want
    assert duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM claims").fetchone() == (0,)

    # a bad claims file: one line, exit 2, the last good verdicts left as they were
    before = _sha(out)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"claims": [{**CLAIM, "unit": "nope"}]}))
    capsys.readouterr()
    assert _stage().main(["--db", str(db), "--claims", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "claim 'ii': field 'unit'" in err[0], err
    assert _sha(out) == before and not list(tmp_path.glob(".claims.duckdb*"))
    assert _stage().main(["--db", str(db), "--out", str(db)]) == 2  # never over the store
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and _sha(db) == store_before, err

    # the site takes the claims from claims.duckdb beside the store (the store's own table is empty)
    index = build_site(db, tmp_path / "site")
    page = (index.parent / "claims.html").read_text()
    assert '<td class="verdict ok">reproduced</td>' in page and "ii:a-vs-b" in page
    assert "ii:a-vs-b" in gzip.decompress((index.parent / "data" / "claims.csv.gz").read_bytes()).decode()
    # an explicit --claims-db that does not exist is one line, exit 2, and nothing is built
    from leaderboard.site import main as site_main

    capsys.readouterr()
    args = ["--db", str(db), "--claims-db", str(tmp_path / "nope.duckdb"), "--out", str(tmp_path / "s2")]
    assert site_main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--claims-db" in err[0] and not (tmp_path / "s2").exists(), err


def test_dvc_claims_stage_follows_ingest_and_feeds_the_site():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert "claims" not in stages["ingest"]["cmd"]
    assert [next(iter(m)) for m in stages["claims"]["metrics"]] == ["leaderboard/claims_summary.json"]
    assert "leaderboard/peeval.duckdb" in stages["claims"]["deps"]
    assert stages["claims"]["outs"] == ["leaderboard/claims.duckdb"]
    assert "leaderboard/claims.duckdb" in stages["site"]["deps"]
    for dep in stages["claims"]["deps"]:  # every source it reads is tracked (the store is ingest's output)
        assert dep == "leaderboard/peeval.duckdb" or (ROOT / dep).exists(), dep
