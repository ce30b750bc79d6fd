"""Issue 41 item 2: ingest reads a run's kind from the run's own record (the kind ``peeval eval`` recorded, the
summaries of the checkpoint it evaluated), never from its model's name; each input has one typed parser, and an
input of no known type is refused in one line."""

import json
import typing
from pathlib import Path

import duckdb
import pytest

from leaderboard.ingest import IngestError, ingest, main
from leaderboard.ingest.rows import ROW_TYPES
from leaderboard.store import TABLE_COLUMNS, WRITTEN
from peeval.records import SHIPPED_MODELS

GGUF = next(iter(SHIPPED_MODELS))  # the packaged base model's file
SHIPPED = f"{SHIPPED_MODELS[GGUF]} as shipped"


def _results(d: Path, model: str, model_args: dict, run_kind=None) -> Path:
    d.mkdir(parents=True)
    prov = {"model": model, "model_args": model_args, "checkpoint": model_args.get("pretrained"), "pe": "rope",
            "seed": 0, "date": "2026-11-23T10:00:00+00:00", "protocol": {"ppl": None, "metadata": {}}}  # fmt: skip
    if run_kind is not None:
        prov["run_kind"] = run_kind
    doc = {"results": {"piqa": {"acc,none": 0.6, "acc_stderr,none": 0.1}}, "peeval": prov}
    (d / "results.json").write_text(json.dumps(doc))
    return d


def _stored(tmp_path: Path, *paths: Path) -> list[tuple]:
    db = tmp_path / "kinds.duckdb"
    ingest(list(paths), db, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("select name, kind, source from runs order by name").fetchall()
    finally:
        con.close()


def test_every_row_type_has_its_tables_columns():
    assert set(ROW_TYPES) == set(WRITTEN)
    for table, row in ROW_TYPES.items():
        keys = set(typing.get_type_hints(row)) - {"_content", "_identity", "_training", "_protocol"}  # never stored
        assert keys == set(TABLE_COLUMNS[table]), table


@pytest.mark.parametrize(
    ("model", "recorded", "stored"),
    [
        # the packaged base on peeval's Llama: the old guess made it the adapters' reference row; recorded external
        ("peeval-llama", "external", ("peeval-llama:base", "external")),
        # another model name on the same file, recorded as the base as shipped: what the record says
        ("hf", "adapt", (SHIPPED, "adapt")),
        # results written before peeval recorded a kind (the published ones): the rule of their time
        ("peeval-llama", None, (SHIPPED, "adapt")),
        ("hf", None, ("hf:base", "external")),
    ],
)
def test_the_recorded_kind_is_stored_whatever_the_model_name(tmp_path, model, recorded, stored):
    run = _results(tmp_path / "results" / "r", model, {"pretrained": "models/base", "gguf_file": GGUF}, recorded)
    assert _stored(tmp_path, run) == [(*stored, "local")]


def _checkpoint(d: Path, task=None) -> None:
    d.mkdir(parents=True)
    s = {"pe": "alibi", "pe_options": {}, "params": 10, "task": task, "seed": 1, "training_length": 64}
    (d / "train_summary.json").write_text(json.dumps(s))


def test_a_checkpoint_summary_and_the_recorded_kind_agree(tmp_path):
    _checkpoint(tmp_path / "checkpoints" / "diag", task="addition")
    run = _results(tmp_path / "results" / "d", "peeval", {"pretrained": "checkpoints/diag"}, "diagnostic")
    assert _stored(tmp_path, run) == [("alibi", "diagnostic", "local")]


@pytest.mark.parametrize(
    ("recorded", "task", "message"),
    [
        ("pretrain", "addition", "peeval.run_kind is 'pretrain' but the checkpoint .* makes it 'diagnostic'"),
        ("external", None, "peeval.run_kind is 'external' but the checkpoint .* makes it 'pretrain'"),
        ("finetune", None, "peeval.run_kind 'finetune' is not one of pretrain, diagnostic, adapt, external"),
    ],
)
def test_a_record_the_checkpoint_contradicts_is_refused(tmp_path, recorded, task, message):
    _checkpoint(tmp_path / "checkpoints" / "ck", task=task)
    run = _results(tmp_path / "results" / "r", "peeval", {"pretrained": "checkpoints/ck"}, recorded)
    with pytest.raises(IngestError, match=message):
        ingest([run], tmp_path / "s.duckdb", root=tmp_path)
    assert not (tmp_path / "s.duckdb").exists()


def test_a_recorded_pretraining_whose_checkpoint_is_gone_is_refused_not_made_external(tmp_path):
    run = _results(tmp_path / "results" / "r", "peeval", {"pretrained": "checkpoints/gone"}, "pretrain")
    with pytest.raises(IngestError, match=r"checkpoints/gone/train_summary\.json is missing"):
        ingest([run], tmp_path / "s.duckdb", root=tmp_path)


def test_an_adapt_record_without_an_adapter_or_packaged_base_is_refused(tmp_path):
    run = _results(tmp_path / "results" / "r", "hf", {"pretrained": "gpt2"}, "adapt")
    with pytest.raises(IngestError, match="names neither an adapter nor a packaged base model"):
        ingest([run], tmp_path / "s.duckdb", root=tmp_path)


@pytest.mark.parametrize("name", ["notes.txt", "train_curve.csv", "results.jsonl"])
def test_an_input_of_no_known_type_is_one_line_exit_2_nothing_written(tmp_path, capsys, name):
    _results(tmp_path / "results" / "r", "hf", {"pretrained": "gpt2"})  # a valid run beside it: never searched
    f = tmp_path / "results" / "r" / name
    f.write_text("x\n")
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "--root", str(tmp_path), str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{f}: not an input ingest reads" in err[0], err
    assert "results.json" in err[0] and "SOURCE.json" in err[0]  # says what it reads
    assert not db.exists()


def test_a_record_file_named_reads_its_folder(tmp_path):
    run = _results(tmp_path / "results" / "r", "hf", {"pretrained": "gpt2"})
    assert _stored(tmp_path, run / "results.json") == [("hf:gpt2", "external", "local")]


def test_peeval_eval_records_the_kind_of_what_it_loads(tmp_path):
    """The writer's side (peeval.evaluation.runner.run_kind): what ingest reads back."""
    from peeval.evaluation.runner import run_kind

    _checkpoint(tmp_path / "pre")
    _checkpoint(tmp_path / "diag", task="addition")
    (tmp_path / "ad").mkdir()
    (tmp_path / "ad" / "adapt_summary.json").write_text('{"method": "pi"}')
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "train_summary.json").write_text("[")
    assert run_kind("peeval", {"pretrained": str(tmp_path / "pre")}) == "pretrain"
    assert run_kind("peeval", {"pretrained": str(tmp_path / "diag")}) == "diagnostic"
    assert run_kind("peeval", {"pretrained": str(tmp_path / "ad")}) == "adapt"
    assert run_kind("peeval-llama", {"pretrained": "x", "adapter": str(tmp_path / "none")}) == "adapt"
    assert run_kind("peeval-llama", {"pretrained": "x", "gguf_file": GGUF}) == "adapt"  # the base as shipped
    assert run_kind("peeval-llama", {"pretrained": "x", "gguf_file": GGUF, "rope_scaling": "yarn"}) == "external"
    assert run_kind("hf", {"pretrained": "gpt2"}) == "external"
    assert run_kind("peeval", {"pretrained": str(tmp_path / "bad")}) is None  # ingest reads and names the file
