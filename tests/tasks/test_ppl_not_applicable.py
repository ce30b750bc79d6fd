"""Issue 43: the cpu profile's learned model has one position row per training position (256), so
its perplexity at 512..4096 is "not applicable": no cell, not an error that stops the length sweep
and not a number read from rows that do not exist. The lengths it can read are scored as before,
on the same targets (the run is placed by the longest length, not by the longest readable one)."""

import json

import pytest
from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import needs_mirror

from peeval.perplexity import NOT_APPLICABLE, lengths_past_table, target_span, target_windows

TEXT = " ".join(["the cat sat on the mat and the dog ran to it"] * 60) + "."


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    from lm_eval.api.registry import get_model

    ck = save_tiny_checkpoint(tmp_path_factory.mktemp("na") / "learned", [TEXT], pe="learned", vocab_size=300,
                              max_positions=32, byte_decoder=True)  # fmt: skip
    return get_model("peeval")(pretrained=str(ck), device="cpu", max_length=64)


def _row(L):
    return {"doc_id": 0, "peeval_window": L, "peeval_protocol": "targets", "peeval_targets": 20, "peeval_skip": 10,
            "peeval_seed": 0, "peeval_longest": 64, "peeval_buckets": 0}  # fmt: skip


def test_lengths_past_the_table_are_named_and_others_are_not(learned):
    assert set(lengths_past_table(learned.model, {16, 32, 33, 64})) == {33, 64}
    assert "32-row position table" in lengths_past_table(learned.model, {64})[64]
    assert lengths_past_table(object(), {10**6}) == {}  # a model with no learned table: nothing is skipped


def test_readable_lengths_are_scored_by_hand_on_the_longest_lengths_targets(learned):
    import torch

    rows = [(TEXT, _row(L)) for L in (16, 32, 64)]
    got = learned.score_rows(rows)
    assert got[2] == {NOT_APPLICABLE: lengths_past_table(learned.model, {64})[64]}
    ids = learned.tok_encode(TEXT, add_special_tokens=False)
    span = target_span(len(ids), per_doc=20, skip=10, longest=64, seed=0, doc_id=0)
    for L, r in zip((16, 32), got[:2]):
        ll = 0.0
        for w in target_windows(span, L):
            with torch.no_grad():
                logp = learned.model(input_ids=torch.tensor(ids[w.start : w.end])[None]).logits[0].double()
            logp = logp.log_softmax(-1)
            ll += sum(logp[j - 1, ids[w.start + j]].item() for j in range(w.length - w.scored, w.length))
        assert r["tokens"] == 20 and r["span"] == list(span) and r["ll"] == pytest.approx(ll, rel=1e-5)


@needs_mirror("local", "gutenberg-eval")
def test_peeval_eval_writes_the_readable_cells_only(tmp_path, capsys):
    from peeval.cli import main

    ck = save_tiny_checkpoint(tmp_path / "learned", [TEXT], pe="learned", vocab_size=300, max_positions=32)
    md = {"lengths": [16, 32, 64], "protocol": "windows", "max_windows": 1}
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", "peeval_ppl_pg19", "--device",
            "cpu", "--limit", "1", "--metadata", json.dumps(md), "--output_path", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    (res,) = (tmp_path / "o").glob("*/results.json")
    scores = json.loads(res.read_text())["results"]["peeval_ppl_pg19"]
    assert {"ppl@16,none", "ppl@32,none"} <= set(scores), sorted(scores)
    assert not any(k.startswith(("ppl@64", "bpb@64", "tokens@64", "windows@64")) for k in scores), sorted(scores)
