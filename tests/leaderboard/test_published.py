"""Published results (issue 19): a profile's results copied by ``leaderboard.publish`` are ingested
beside local runs with their source and machine, shown marked on the site, never replaced by a
local run, and kept out of the local claims."""

import json
import math
from pathlib import Path

import duckdb
import pytest
from conftest import REPO
from helpers.duck import query as _q

from leaderboard.ingest import IngestError, ingest  # noqa: E402
from leaderboard.publish import PublishError, main, publish  # noqa: E402
from leaderboard.site import build_site  # noqa: E402


def _local_run(root: Path, ppl: float) -> None:
    """results/rope (ppl@64 = ``ppl``) of checkpoints/pretrain/rope, as the pipeline lays them out."""
    ck = root / "checkpoints" / "pretrain" / "rope"
    ck.mkdir(parents=True, exist_ok=True)
    (ck / "model.safetensors").write_bytes(b"weights")
    (ck / "train_summary.json").write_text(json.dumps({
        "pe": "rope", "pe_options": {}, "task": None, "seed": 0, "params": 1000, "steps": 3, "tokens": 300,
        "train_time_s": 2.0, "tokens_per_s": 150.0, "final_val_loss": 5.0, "final_val_ppl": math.exp(5.0),
        "training_length": 64}))  # fmt: skip
    (ck / "train_curve.csv").write_text("step,tokens,lr,train_loss,val_loss,elapsed_s\n1,100,0.001,6.0,5.5,1\n")
    d = root / "results" / "rope"
    d.mkdir(parents=True, exist_ok=True)
    prov = {"peeval_version": "0.1.0", "git_commit": "abc", "model": "peeval",
            "model_args": {"pretrained": "checkpoints/pretrain/rope"}, "checkpoint": "checkpoints/pretrain/rope",
            "pe": "rope", "max_length": 128, "training_length": 64, "dtype": "torch.float32",
            "protocol": {"ppl": "disjoint windows"}, "seed": 0, "device": "cuda:0", "versions": {},
            "date": "2026-11-22T10:00:00+00:00"}  # fmt: skip
    res = {"peeval_ppl_pg19": {"ppl@64,none": ppl, "ppl@128,none": 2 * ppl}}
    (d / "results.json").write_text(json.dumps({"results": res, "peeval": prov}))


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _local_run(tmp_path, 30.0)
    return tmp_path


def test_publish_copies_results_and_summaries_never_weights(repo):
    out = publish("gpu", "1x NVIDIA H100 80GB", out=repo / "published")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["SOURCE.json", "checkpoints/pretrain/rope/train_curve.csv",
                     "checkpoints/pretrain/rope/train_summary.json", "results/rope/results.json"]  # fmt: skip
    src = json.loads((out / "SOURCE.json").read_text())
    assert src["profile"] == "gpu" and src["machine"] == "1x NVIDIA H100 80GB" and src["devices"] == ["cuda:0"]
    with pytest.raises(PublishError, match="exists: pass --replace"):  # a published folder is never replaced silently
        publish("gpu", "other", out=repo / "published")
    assert json.loads((out / "SOURCE.json").read_text())["machine"] == "1x NVIDIA H100 80GB"
    publish("gpu", "other", out=repo / "published", replace=True)
    assert json.loads((out / "SOURCE.json").read_text())["machine"] == "other"


def test_source_names_the_cpu_and_kernel_path_of_each_result(repo):
    """SOURCE.json says which CPU and torch kernel path computed the numbers (issue 40): a rerun on another one
    reproduces them to a tolerance, not bit for bit; a result written before provenance named its CPU says so."""
    out = publish("cpu", "2-core CPU", out=repo / "published")
    assert json.loads((out / "SOURCE.json").read_text())["cpu"] == [
        "not recorded (results written before provenance named the CPU)"
    ]
    f = repo / "results" / "rope" / "results.json"
    doc = json.loads(f.read_text())
    doc["peeval"]["cpu"] = {"model": "AMD EPYC", "torch_capability": "AVX2"}
    f.write_text(json.dumps(doc))
    out = publish("cpu", "2-core CPU", out=repo / "published", replace=True)
    assert json.loads((out / "SOURCE.json").read_text())["cpu"] == ["AMD EPYC, torch kernels AVX2"]


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--profile", "GPU!", "--machine", "m"], "--profile"),
        (["--profile", "gpu", "--machine", " "], "--machine"),
        (["--profile", "gpu", "--machine", "m", "--results", "nowhere"], "--results nowhere"),
    ],
)
def test_publish_bad_arguments_are_one_line(repo, capsys, argv, msg):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err
    assert not (Path(REPO) / "leaderboard" / "published" / "GPU!").exists()


def test_publish_makes_checkpoint_paths_relative(repo):
    """An absolute checkpoint path of the machine that ran the profile becomes repository-relative,
    so the published run finds its published training summary on any clone."""
    f = repo / "results" / "rope" / "results.json"
    doc = json.loads(f.read_text())
    doc["peeval"]["checkpoint"] = doc["peeval"]["model_args"]["pretrained"] = str(repo / "checkpoints/pretrain/rope")
    f.write_text(json.dumps(doc))
    out = publish("gpu", "m", out=repo / "published")
    prov = json.loads((out / "results" / "rope" / "results.json").read_text())["peeval"]
    assert prov["checkpoint"] == prov["model_args"]["pretrained"] == "checkpoints/pretrain/rope"


def test_published_runs_ingest_beside_local_ones_marked_and_never_replaced(repo):
    publish("gpu", "1x NVIDIA H100 80GB", out=repo / "published")
    _local_run(repo, 40.0)  # the local pipeline reruns: a different local result, same paths
    db = repo / "store.duckdb"
    ingest([repo / "results", repo / "checkpoints"], db, root=repo, published=repo / "published")
    runs = _q(db, "select name, source, machine, checkpoint from runs order by source")
    assert runs == [("rope", "local", None, "checkpoints/pretrain/rope"),
                    ("rope @gpu", "published/gpu", "1x NVIDIA H100 80GB",
                     "published/gpu/checkpoints/pretrain/rope")]  # fmt: skip
    vals = dict(_q(db, "select r.source, m.value from metrics m join runs r using (run_id) where m.metric = 'ppl@64'"))
    assert vals == {"local": 40.0, "published/gpu": 30.0}
    assert sorted(r[0] for r in _q(db, "select checkpoint from efficiency")) == [
        "checkpoints/pretrain/rope", "published/gpu/checkpoints/pretrain/rope"]  # fmt: skip
    # re-ingesting the local folders alone into the same store leaves the published rows as they were
    ingest([repo / "results"], db, root=repo)
    assert dict(_q(db, "select source, count(*) from runs group by source")) == {"local": 1, "published/gpu": 1}

    index = build_site(db, repo / "site")
    html = index.read_text()
    assert "rope @gpu" in html and "1x NVIDIA H100 80GB" in html and "published/gpu" in html

    from leaderboard.claims import read_store

    con = duckdb.connect(str(db), read_only=True)
    try:
        assert [r["source"] for r in read_store(con).runs.values()] == ["local"]
    finally:
        con.close()


def test_the_first_screen_compares_each_source_with_its_own_rope(repo):
    """Local runs against the local RoPE first; a published profile against its own RoPE, folded below
    (never one machine's encoding against another machine's RoPE); published first only when nothing ran here."""
    publish("gpu", "1x NVIDIA H100 80GB", out=repo / "published")
    db = repo / "store.duckdb"
    ingest([repo / "results", repo / "checkpoints"], db, root=repo, published=repo / "published")
    site = repo / "site"
    html = build_site(db, site).read_text()

    def names(tid):
        return [r["encoding"] for r in json.loads((site / "data" / f"{tid}.json").read_text())]

    assert names("vs_rope") == ["rope"] and names("vs_rope_gpu") == ["rope @gpu"]
    assert html.index('id="vs_rope"') < html.index('<details class="published-vs"') < html.index('id="vs_rope_gpu"')
    assert "1 encodings, each" in html and "2 encodings" not in html  # the budget line: this machine's runs only

    only = repo / "only.duckdb"  # nothing ran here: the published profile is the first table, said so
    ingest([], only, root=repo, published=repo / "published")
    html = build_site(only, repo / "site2").read_text()
    assert "No RoPE run on this machine" in html and '<details class="published-vs"' not in html
    assert json.loads((repo / "site2" / "data" / "vs_rope.json").read_text())[0]["encoding"] == "rope @gpu"


def test_a_published_folder_ingested_on_its_own_keeps_its_machine_and_is_judged(repo):
    """`make site`: the published folder named as a path is read as its profile's runs (source published/<profile>,
    the machine its SOURCE.json names, names ``… @<profile>``), never as local ones (issue 42: a user's run
    ingested beside them would have become one more seed); the claims judge that source when told to."""
    out = publish("gpu", "1x NVIDIA H100 80GB", out=repo / "published")
    db = repo / "site.duckdb"
    ingest([out], db, root=out)
    assert _q(db, "select name, source, machine, checkpoint from runs") == [
        ("rope @gpu", "published/gpu", "1x NVIDIA H100 80GB", "published/gpu/checkpoints/pretrain/rope")]  # fmt: skip
    assert _q(db, "select checkpoint from efficiency") == [("published/gpu/checkpoints/pretrain/rope",)]
    from leaderboard.claims import read_store

    con = duckdb.connect(str(db), read_only=True)
    try:
        assert read_store(con).runs == {}  # nothing local to judge
        assert [r["name"] for r in read_store(con, "published/gpu").runs.values()] == ["rope @gpu"]
    finally:
        con.close()
    ingest([repo / "results"], repo / "local.duckdb", root=repo)  # a plain results folder: this machine
    assert _q(repo / "local.duckdb", "select machine, source from runs") == [(None, "local")]


@pytest.mark.parametrize(
    ("source", "msg"),
    [
        (None, "needs SOURCE.json"),
        ({"profile": "gpu"}, "'machine' must be a non-empty string"),
        ({"profile": "cpu", "machine": "m"}, "the folder is named 'gpu'"),
    ],
)
def test_bad_published_folder_names_the_file(repo, source, msg):
    out = publish("gpu", "m", out=repo / "published")
    if source is None:
        (out / "SOURCE.json").unlink()
    else:
        (out / "SOURCE.json").write_text(json.dumps(source))
    with pytest.raises(IngestError, match=msg):
        ingest([repo / "results"], repo / "s.duckdb", root=repo, published=repo / "published")
    assert not (repo / "s.duckdb").exists() or _q(repo / "s.duckdb", "select count(*) from runs") == [(0,)]


def test_published_samples_drop_dataset_text_and_ingest_to_the_same_rows(repo):
    """A SCROLLS-like sample (a 50,000-character document and prompt): published without ``doc``, the prompt and
    target cut as ingest cuts them, and ingest reads the same row from either file."""
    from leaderboard.ingest import TEXT_LIMIT, _sample_row

    text = "".join(f"word{i} " for i in range(8000))  # ~50k characters
    target = "t" * (TEXT_LIMIT + 10)
    sample = {"doc_id": 0, "doc": {"input": text, "outputs": [target]}, "target": target,
              "arguments": [[text + "\nQuestion?", {"until": ["\n"]}]], "resps": [["an answer"]],
              "filtered_resps": ["an answer"], "filter": "none", "metrics": ["rouge1", "rouge2", "rougeL"],
              "doc_hash": "d" * 64, "rouge1": 0.5, "rouge2": 0.25, "rougeL": 0.5}  # fmt: skip
    f = repo / "results" / "rope" / "samples_peeval_scrolls_qmsum.jsonl"
    f.write_text(json.dumps(sample) + "\n")
    out = publish("gpu", "m", out=repo / "published")
    pub = out / "results" / "rope" / f.name
    (got,) = [json.loads(line) for line in pub.read_text().splitlines()]
    assert "doc" not in got and got["doc_hash"] == "d" * 64
    assert len(got["arguments"][0][0]) < TEXT_LIMIT + 40 and got["arguments"][0][1] == {"until": ["\n"]}
    assert pub.stat().st_size < f.stat().st_size / 10
    assert _sample_row(got, "peeval_scrolls_qmsum", "r") == _sample_row(sample, "peeval_scrolls_qmsum", "r")


def test_published_samples_keep_the_first_request_and_one_response(repo):
    """A flip-flop-like sample (one request per read, each a longer prefix; resps and filtered_resps): published
    with its first request and filtered_resps only, ingest reads the same row and the same metrics count."""
    from leaderboard.ingest import _sample_row, _sample_rows

    reads = [("w 1 r", " 1"), ("w 1 r 1 w 0 r", " 0"), ("w 1 r 1 w 0 r 0 r", " 0")]
    sample = {"doc_id": 3, "target": "0", "arguments": [[p, t] for p, t in reads],
              "resps": [[[-0.1, True]], [[-0.2, True]], [[-3.0, False]]],
              "filtered_resps": [[-0.1, True], [-0.2, True], [-3.0, False]], "filter": "none",
              "metrics": ["acc", "read_acc"], "doc_hash": "d" * 64,
              "acc": 0.0, "read_acc": [1.0, 1.0, 0.0]}  # fmt: skip
    d = repo / "results" / "rope"
    (d / "samples_peeval_diag_flip_flop_test.jsonl").write_text(json.dumps(sample) + "\n")
    out = publish("gpu", "m", out=repo / "published")
    (got,) = [
        json.loads(x) for x in (out / "results/rope/samples_peeval_diag_flip_flop_test.jsonl").read_text().splitlines()
    ]
    assert (
        got["arguments"] == [list(reads[0])]
        and "resps" not in got
        and got["filtered_resps"] == sample["filtered_resps"]
    )
    assert got["read_acc"] == [1.0, 1.0, 0.0]
    task = "peeval_diag_flip_flop_test"
    assert _sample_row(got, task, "r") == _sample_row(sample, task, "r")
    assert _sample_rows(out / "results" / "rope", "r")[:2] == _sample_rows(d, "r")[:2]
