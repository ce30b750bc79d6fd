"""A hub run and a mirror run of the same task are told apart: in the store (task_data, from results.json's
peeval.data), on the site (columns, the perplexity page, run pages) and by the claims (never paired)."""

import csv
import json
import re

import duckdb
import pytest

from leaderboard.claims.matching import claim_data, matching_runs, read_store  # noqa: E402
from leaderboard.claims.schema import Variant  # noqa: E402
from leaderboard.ingest import IngestError, ingest  # noqa: E402
from leaderboard.site import build_site  # noqa: E402

TASK = "peeval_ppl_pg19"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB = {"source": "hub", "location": "deepmind/pg19", "split": "test", "revision": COMMIT, "documents": 2,
       "documents_sha256": "a" * 64}  # fmt: skip
MIRROR = {"source": "mirror", "location": "local/gutenberg-eval", "split": "test", "documents": 2,
          "documents_sha256": "b" * 64}  # fmt: skip


def write_run(root, name, pe, read, ppl, date):
    ck = root / "checkpoints" / pe
    ck.mkdir(parents=True, exist_ok=True)
    (ck / "train_summary.json").write_text(json.dumps({"pe": pe, "pe_options": {}, "params": 1000, "seed": 0,
                                                       "training_length": 64}))  # fmt: skip
    d = root / "results" / name
    d.mkdir(parents=True)
    prov = {"model": "peeval", "model_args": {"pretrained": str(ck)}, "checkpoint": str(ck), "pe": pe,
            "training_length": 64, "protocol": {"ppl": "disjoint windows"}, "seed": 0, "date": date,
            "data": {TASK: [read]} if read else None}  # fmt: skip
    results = {TASK: {"ppl@64,none": ppl, "bpb@64,none": 1.0, "tokens@64,none": 126, "windows@64,none": 2}}
    (d / "results.json").write_text(json.dumps({"results": results, "peeval": prov}))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("provenance")
    write_run(root, "rope-hub", "rope", HUB, 20.0, "2026-11-22T10:00:00+00:00")
    write_run(root, "rope-mirror", "rope", MIRROR, 30.0, "2026-11-22T11:00:00+00:00")
    write_run(root, "tape-mirror", "tape", MIRROR, 25.0, "2026-11-22T12:00:00+00:00")
    db = root / "peeval.duckdb"
    ingest([root / "results", root / "checkpoints"], db, root=root)
    return root, db


def test_provenance_survives_results_json_to_the_store(store):
    _, db = store
    con = duckdb.connect(str(db), read_only=True)
    q = ("select r.results_path, d.task, d.source, d.location, d.revision, d.documents, d.documents_sha256 "
         "from task_data d join runs r using (run_id) order by 1")  # fmt: skip
    rows = con.execute(q).fetchall()
    con.close()
    assert rows == [
        ("results/rope-hub/results.json", TASK, "hub", "deepmind/pg19", COMMIT, 2, "a" * 64),
        ("results/rope-mirror/results.json", TASK, "mirror", "local/gutenberg-eval", None, 2, "b" * 64),
        ("results/tape-mirror/results.json", TASK, "mirror", "local/gutenberg-eval", None, 2, "b" * 64),
    ]


def test_the_site_never_shows_a_hub_and_a_mirror_run_under_one_label(store, tmp_path):
    _, db = store
    out = build_site(db, tmp_path / "site").parent
    with open(out / "data" / "leaderboard.csv") as fh:
        board = {r["encoding"]: r for r in csv.DictReader(fh)}
    # rope's two runs: two columns, each its own number (never their mean, 25)
    assert float(board["rope"]["PG-19 test ppl@64 ↓"]) == 20.0
    assert float(board["rope"]["Gutenberg books (PG-19 substitute) ppl@64 ↓"]) == 30.0
    assert board["tape"]["PG-19 test ppl@64 ↓"] == "–"  # tape read only the mirror's stand-in
    with open(out / "data" / "ppl_by_length_table.csv") as fh:
        ppl = [(r["name"], r["corpus"], float(r["ppl"])) for r in csv.DictReader(fh)]
    assert sorted(ppl) == [("rope", "Gutenberg books (PG-19 substitute)", 30.0), ("rope", "PG-19 test", 20.0),
                           ("tape", "Gutenberg books (PG-19 substitute)", 25.0)]  # fmt: skip
    page = (out / "ppl.html").read_text()
    assert "PG-19 test: ppl vs context length" in page and "Gutenberg books (PG-19 substitute): ppl vs" in page
    index = re.sub(r"<[^>]+>", "", (out / "index.html").read_text())  # the text (headers hold nowrap spans)
    assert "Gutenberg books (PG-19 substitute) ppl ÷ RoPE @64" in index and "PG-19 test ppl ÷ RoPE @64" in index
    run_pages = "".join(p.read_text() for p in (out / "runs").glob("*.html"))
    assert COMMIT in run_pages and "b" * 64 in run_pages


def test_claims_never_pair_a_mirror_run_with_a_hub_run(store):
    _, db = store
    con = duckdb.connect(str(db), read_only=True)
    s = read_store(con)
    tape = matching_runs(s, Variant("tape", pe="tape"), {}, tasks=[TASK])
    data = claim_data(s, tape, [TASK])
    assert data == frozenset({("mirror", "local/gutenberg-eval")})
    names = {rid: r["results_path"] for rid, r in s.runs.items()}
    both = [names[rid] for u in matching_runs(s, Variant("rope", pe="rope"), {}, tasks=[TASK]) for rid in u]
    same = [names[rid] for u in matching_runs(s, Variant("rope", pe="rope"), {}, tasks=[TASK], data=data) for rid in u]
    con.close()
    assert "results/rope-hub/results.json" in both  # without the data, the latest rope run of the seed would be taken
    assert same == ["results/rope-mirror/results.json"]


@pytest.mark.parametrize(
    ("read", "says"),
    [
        ({**MIRROR, "source": "cloud"}, r"peeval\.data\['peeval_ppl_pg19'\]\[0\]\.source 'cloud' is not one of"),
        ({**MIRROR, "documents_sha256": "xyz"}, r"documents_sha256 'xyz' is not a sha256"),
        ({**MIRROR, "location": ""}, r"\.location must be a non-empty string"),
    ],
)
def test_a_malformed_record_is_one_line_naming_the_key(tmp_path, read, says):
    write_run(tmp_path, "bad", "rope", read, 20.0, "2026-11-22T10:00:00+00:00")
    with pytest.raises(IngestError, match=says) as e:
        ingest([tmp_path / "results"], tmp_path / "x.duckdb", root=tmp_path)
    assert "\n" not in str(e.value) and not (tmp_path / "x.duckdb").exists()
