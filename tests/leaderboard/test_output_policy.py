"""Issue 56, data loss: every command that writes replaces only a file or folder of its own kind (checked by
content) and never writes into or over one of its inputs (``peeval._io.outputs``); otherwise one line, exit 2,
nothing written. One test per row of the issue's table."""

import contextlib
import importlib.util
import json
from pathlib import Path

import pytest
from conftest import REPO
from helpers.duck import query as _q
from test_published import _local_run

from leaderboard.ingest import IngestError, ingest
from leaderboard.publish import main as publish_main
from leaderboard.publish import publish
from leaderboard.store import connect
from peeval._io import outputs as _outputs
from peeval.cli import main as peeval_main

WEIGHTS = b"\x08\x00\x00\x00\x00\x00\x00\x00{}      \x00\x01weights"


def _claims_stage():
    spec = importlib.util.spec_from_file_location("claims_stage", Path(REPO) / "pipelines" / "claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    return stage


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_claims_summary_never_overwrites_the_store(tmp_path, capsys):
    """`pipelines/claims.py --db S --summary S`: the store S was overwritten with JSON (exit 0)."""
    db = tmp_path / "s.duckdb"
    connect(db).close()
    before = db.read_bytes()
    assert _claims_stage().main(["--db", str(db), "--summary", str(db)]) == 2
    assert "--summary" in _one_line(capsys.readouterr().err)
    assert db.read_bytes() == before and not (tmp_path / "claims.duckdb").exists()
    # --out over a file that is no DuckDB database (the user's notes) is refused too, before anything is computed
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    assert _claims_stage().main(["--db", str(db), "--out", str(notes)]) == 2
    assert "not a DuckDB database" in _one_line(capsys.readouterr().err) and notes.read_text() == "mine"


@pytest.mark.parametrize("option", ["--json", "--md"])
def test_bench_report_never_replaces_weights(tmp_path, monkeypatch, capsys, option):
    """`peeval bench --train --json CKPT/model.safetensors` (or --md): the weights were replaced by the report."""
    from peeval.bench import train as train_bench

    monkeypatch.setattr(train_bench, "time_entry", lambda *a, **k: {"entry": a[0], "error": "not timed here"})
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(WEIGHTS)
    assert peeval_main(["bench", "--train", "--profile", "smoke", "--pe", "rope", option, str(weights)]) == 2
    assert option in _one_line(capsys.readouterr().err) and weights.read_bytes() == WEIGHTS
    results = tmp_path / "results.json"  # valid JSON (and text), but an evaluation's results: not a report
    results.write_text('{"results": {"t": {"acc,none": 0.5}}, "peeval": {}}\n')
    before = results.read_bytes()
    assert peeval_main(["bench", "--train", "--profile", "smoke", "--pe", "rope", option, str(results)]) == 2
    assert option in _one_line(capsys.readouterr().err) and results.read_bytes() == before
    # a report of its own kind is replaced as before
    own = tmp_path / ("r.json" if option == "--json" else "r.md")
    own.write_text("[]" if option == "--json" else _outputs.stamp_markdown("| old |\n", "peeval bench --md"))
    assert peeval_main(["bench", "--train", "--profile", "smoke", "--pe", "rope", option, str(own)]) == 0
    assert "rope" in own.read_text()


def test_publish_replace_never_deletes_a_users_folder(tmp_path, monkeypatch, capsys):
    """`publish --profile victim --out D --replace`, D/victim holding a user's files: they were deleted."""
    monkeypatch.chdir(tmp_path)
    _local_run(tmp_path, 30.0)
    victim = tmp_path / "D" / "victim"
    victim.mkdir(parents=True)
    (victim / "thesis.tex").write_text("years of work")
    argv = ["--profile", "victim", "--machine", "m", "--out", str(tmp_path / "D"), "--replace"]
    assert publish_main(argv) == 2
    assert "not a published profile" in _one_line(capsys.readouterr().err)
    assert (victim / "thesis.tex").read_text() == "years of work"
    # a published profile is replaced; one a user added a file to is not
    (victim / "thesis.tex").unlink()
    assert publish_main(argv) == 0 and (victim / "SOURCE.json").is_file()
    assert publish_main(argv) == 0
    (victim / "notes.md").write_text("added")
    assert publish_main(argv) == 2 and (victim / "notes.md").read_text() == "added"


def test_publish_never_replaces_its_own_results(tmp_path, monkeypatch, capsys):
    """`publish --profile results --out . --replace`: results/ was replaced by its own slimmed copy."""
    monkeypatch.chdir(tmp_path)
    _local_run(tmp_path, 30.0)
    before = (tmp_path / "results" / "rope" / "results.json").read_bytes()
    assert publish_main(["--profile", "results", "--machine", "m", "--out", ".", "--replace"]) == 2
    assert "input" in _one_line(capsys.readouterr().err)
    assert (tmp_path / "results" / "rope" / "results.json").read_bytes() == before
    assert not (tmp_path / "results" / "SOURCE.json").exists()


def test_train_never_writes_over_another_tokenizer(tmp_path, monkeypatch, capsys):
    """`peeval train --out DIR --tokenizer TOK`, DIR holding another tokenizer: DIR's tokenizer was replaced."""
    from peeval.training import pretrain

    def reached(*a, **k):
        raise AssertionError("the run started: --out was not checked first")

    monkeypatch.setattr(pretrain, "load_tokenizer", reached)
    tok, other = tmp_path / "tok", tmp_path / "other"
    for d in (tok, other):
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps({"model": d.name}))
    for out in (other, tok):  # another tokenizer's folder, and the --tokenizer read itself
        argv = ["train", "--pe", "rope", "--profile", "smoke", "--out", str(out), "--tokenizer", str(tok)]
        assert peeval_main(argv) == 2
        assert "--out" in _one_line(capsys.readouterr().err)
        assert json.loads((out / "tokenizer.json").read_text()) == {"model": out.name}
        assert sorted(p.name for p in out.iterdir()) == ["tokenizer.json"]


def test_a_local_run_never_deletes_the_published_run_of_the_same_path(tmp_path, monkeypatch):
    """Ingest of a local run whose results path (under --root) equals a published run's: the published run was
    deleted (70 -> 69): the writer deleted by results path whatever the source."""
    monkeypatch.chdir(tmp_path)
    _local_run(tmp_path, 30.0)
    published = publish("cpu", "m", out=tmp_path / "published")
    db = tmp_path / "s.duckdb"
    ingest([published], db)
    run = ("published/cpu", "published/cpu/results/rope/results.json")
    assert _q(db, "SELECT source, results_path FROM runs") == [run]
    clone = tmp_path / "clone"
    here = clone / "published" / "cpu"  # the user's own run, laid out so that its path under --root is the same
    _local_run(here, 31.0)
    monkeypatch.chdir(here)
    with contextlib.suppress(IngestError):  # refused beside the published run: fine, as long as that run stays
        ingest([here / "results"], db, root=clone)
    assert run in _q(db, "SELECT source, results_path FROM runs")


def test_export_overwrite_never_deletes_a_sibling_named_like_its_backup(tmp_path, capsys):
    """`peeval export CKPT sib/exp --overwrite` beside an unrelated `sib/.exp-old/`: that folder was deleted."""
    from conftest import tiny_model

    ckpt = tmp_path / "ckpt"
    tiny_model("rope").save_pretrained(ckpt)
    sib = tmp_path / "sib"
    (sib / ".exp-old").mkdir(parents=True)
    (sib / ".exp-old" / "mine.txt").write_text("kept")
    assert peeval_main(["export", str(ckpt), str(sib / "exp")]) == 0
    assert peeval_main(["export", str(ckpt), str(sib / "exp"), "--overwrite"]) == 0
    assert (sib / ".exp-old" / "mine.txt").read_text() == "kept"
    assert sorted(p.name for p in sib.iterdir()) == [".exp-old", "exp"]
    # and `export CKPT CKPT/inner` (then ingest: two efficiency rows for one checkpoint) is refused
    capsys.readouterr()
    assert peeval_main(["export", str(ckpt), str(ckpt / "inner")]) == 2
    assert "lies inside it" in _one_line(capsys.readouterr().err) and not (ckpt / "inner").exists()


@pytest.mark.parametrize(
    ("content", "kind", "ok"),
    [
        (b"", "json", True),
        (b'{"a": 1}', "json", True),
        (WEIGHTS, "json", False),
        (b"| a |\n", "markdown", False),  # a user's table (issue 66 item 5): only one the command stamped
        (_outputs.stamp_markdown("| a |\n", "peeval bench --md").encode(), "markdown", True),
        (b"my notes", "markdown", False),
        (WEIGHTS, "markdown", False),
        (b"{}", "duckdb", False),
        (b'{"results": {}, "peeval": {}}', "bench", False),  # JSON, but an evaluation's results, not a report
        (b'{"header": "h", "rows": []}', "bench", True),
        (b'[{"entry": "rope"}]', "bench", True),
        (b'{"results": {}}', "claims-summary", False),
        (b'{"comparisons": 3, "reproduced": 1}', "claims-summary", True),
    ],
)
def test_file_kinds_are_told_by_content(tmp_path, content, kind, ok):
    p = tmp_path / "x.json"  # the name says nothing: the content decides
    p.write_bytes(content)
    if ok:
        assert _outputs.check_output_file(p, "--x", kind) == p
    else:
        with pytest.raises(_outputs.OutputRefused, match="never replaced"):
            _outputs.check_output_file(p, "--x", kind)
    assert p.read_bytes() == content
