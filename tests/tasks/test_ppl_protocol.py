"""Issue 27 item 1: perplexity by length on fixed targets. The same target tokens are scored at every
length, only the context grows; so a model that cannot see its context (every attention output
projection zeroed) gets the same perplexity at every length, which the windows protocol (different
text at each length) does not give. Every number here is checked against a forward written out in
the test (float64 log-softmax over full logits), not against the wrapper's own arithmetic."""

import math
import random

import pytest
import torch
from helpers.checkpoints import save_tiny_checkpoint

from peeval.perplexity import Window, bucket_starts, disjoint_windows, target_span, target_windows

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "it", "is", "in", "of", "we", "you", "they",
         "see", "big", "small", "red", "blue", "one", "two"]  # fmt: skip


def _text(n_words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words)) + "."


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    from lm_eval.api.registry import get_model

    ck = save_tiny_checkpoint(tmp_path_factory.mktemp("ppl") / "rope", [_text(400, 1)], pe="rope", vocab_size=300,
                              max_positions=64, byte_decoder=True)  # fmt: skip
    return get_model("peeval")(pretrained=str(ck), device="cpu", max_length=64)


def _row(L, **over):
    doc = {"doc_id": 0, "peeval_window": L, "peeval_protocol": "targets", "peeval_targets": 40, "peeval_skip": 10,
           "peeval_seed": 0, "peeval_longest": 64, "peeval_buckets": 0}  # fmt: skip
    return doc | over


def _by_hand(lm, ids: list[int], windows: list[Window]) -> tuple[float, int]:
    """Σ log p of each window's last ``scored`` tokens, from full logits in float64."""
    ll, n = 0.0, 0
    for w in windows:
        x = torch.tensor(ids[w.start : w.end])[None]
        with torch.no_grad():
            logp = lm.model(input_ids=x).logits[0].double().log_softmax(-1)
        for j in range(w.length - w.scored, w.length):
            ll += logp[j - 1, ids[w.start + j]].item()
            n += 1
    return ll, n


# -- the plans, by hand ------------------------------------------------------------------------------------
def test_target_windows_tile_the_run_from_its_end():
    # run [100, 110) at L = 8: blocks of 8 // 2 = 4 from the end: [106, 110), [102, 106), then [100, 102)
    assert target_windows((100, 110), 8) == [Window(94, 102, 2), Window(98, 106, 4), Window(102, 110, 4)]
    # L = 32 > 2 x the run: one block of all 10 targets, the 32 tokens ending at 110
    assert target_windows((100, 110), 32) == [Window(78, 110, 10)]
    for L in (2, 3, 8, 17, 64, 101):  # every target exactly once, each window L tokens ending at its block
        ws = target_windows((100, 110), L)
        scored = [t for w in ws for t in range(w.end - w.scored, w.end)]
        assert scored == list(range(100, 110)) and all(w.length == L for w in ws)


def test_target_span_is_seeded_past_skip_and_the_longest_window():
    spans = {target_span(10_000, per_doc=50, skip=300, longest=1024, seed=0, doc_id=d) for d in range(20)}
    assert len(spans) > 15  # documents get different places
    assert all(s >= 1023 and e == s + 50 and e <= 10_000 for s, e in spans)
    a = target_span(10_000, per_doc=50, skip=300, longest=64, seed=3, doc_id=7)
    assert a == target_span(10_000, per_doc=50, skip=300, longest=64, seed=3, doc_id=7)
    assert a[0] >= 300
    with pytest.raises(ValueError, match="document 7: 100 tokens, but the targets protocol needs 350"):
        target_span(100, per_doc=50, skip=300, longest=64, seed=3, doc_id=7)


def test_disjoint_and_sliding_windows_by_hand():
    assert disjoint_windows(20, 8) == [Window(0, 8, 7), Window(8, 16, 7)]
    assert disjoint_windows(20, 8, max_windows=1) == [Window(0, 8, 7)]
    # sliding, stride 4: the first window scores its 7 predicted tokens, each later one the 4 new ones
    assert disjoint_windows(16, 8, stride=4) == [Window(0, 8, 7), Window(4, 12, 4), Window(8, 16, 4)]


def test_bucket_starts():
    assert bucket_starts(64, 4) == [0, 16, 32, 48]
    assert bucket_starts(10, 3) == [0, 4, 7]  # ceil(10/3), ceil(20/3)
    assert bucket_starts(8, 32) == [0, 2, 4, 6]  # at most longest // 2 buckets: none is empty


# -- the wrapper against the forward written out -------------------------------------------------------------
def test_targets_are_scored_as_by_hand_and_batching_changes_nothing(lm, monkeypatch):
    text = _text(900)
    ids = lm.tok_encode(text, add_special_tokens=False)
    rows = [(text, _row(L)) for L in (8, 16, 64)]
    got = lm.score_rows(rows)
    span = target_span(len(ids), per_doc=40, skip=10, longest=64, seed=0, doc_id=0)
    for (_, doc), r in zip(rows, got):
        ll, n = _by_hand(lm, ids, target_windows(span, doc["peeval_window"]))
        assert r["tokens"] == n == 40 and r["span"] == list(span)
        assert r["ll"] == pytest.approx(ll, rel=1e-5, abs=1e-4)
        assert r["bytes"] == len(lm.tokenizer.decode(ids[span[0] : span[1]]).encode("utf-8"))
    monkeypatch.setattr(type(lm), "PPL_BATCH_TOKENS_CPU", 16384)  # batched, as on a GPU (CPU: one window a forward)
    monkeypatch.setattr(type(lm), "PPL_LOGITS_CHUNK", 7)  # the loss one row at a time
    for a, b in zip(got, lm.score_rows(rows)):
        assert a["ll"] == pytest.approx(b["ll"], rel=1e-6) and a["tokens"] == b["tokens"]


def test_windows_protocol_is_scored_as_by_hand(lm):
    text = _text(300)
    ids = lm.tok_encode(text, add_special_tokens=False)
    disjoint = {"peeval_window": 16, "peeval_protocol": "windows", "peeval_max_windows": 3}
    sliding = {"peeval_window": 16, "peeval_stride": 8, "peeval_max_windows": 4}
    for doc, windows in [(disjoint, disjoint_windows(len(ids), 16, 16, 3)),
                         (sliding, disjoint_windows(len(ids), 16, 8, 4))]:  # fmt: skip
        (r,) = lm.score_rows([(text, doc | {"doc_id": 0})])
        ll, n = _by_hand(lm, ids, windows)
        assert r["tokens"] == n and r["windows"] == len(windows) and r["ll"] == pytest.approx(ll, rel=1e-5)


def test_loss_by_position_by_hand(lm):
    text = _text(900)
    ids = lm.tok_encode(text, add_special_tokens=False)
    (r,) = lm.score_rows([(text, _row(64, peeval_buckets=4, peeval_targets=30))])
    span = target_span(len(ids), per_doc=30, skip=10, longest=64, seed=0, doc_id=0)
    (w,) = target_windows(span, 64)  # 30 <= 64 // 2: one window
    x = torch.tensor(ids[w.start : w.end])[None]
    with torch.no_grad():
        logp = lm.model(input_ids=x).logits[0].double().log_softmax(-1)
    nll = [-logp[p - 1, ids[w.start + p]].item() for p in range(1, 64)]  # target position p: p tokens of context
    want = [[sum(nll[p - 1] for p in range(lo, hi) if p >= 1), len([p for p in range(lo, hi) if p >= 1])]
            for lo, hi in [(0, 16), (16, 32), (32, 48), (48, 64)]]  # fmt: skip
    assert [c for _, c in r["nll_pos"]] == [15, 16, 16, 16]
    for (s, c), (ws, wc) in zip(r["nll_pos"], want):
        assert c == wc and s == pytest.approx(ws, rel=1e-5)
    (short,) = lm.score_rows([(text, _row(16, peeval_buckets=4))])
    assert "nll_pos" not in short  # only the longest length's windows


def test_a_model_that_cannot_see_context_has_one_perplexity_at_every_length(lm):
    """Done-when of issue 27: zero every attention output projection (the output at a position is then a
    function of its own token only); on fixed targets ppl is the same at every length to 1e-4 relative.
    The windows protocol scores different text at each length, so there it differs: the old protocol
    fails this check."""
    text = _text(1500)
    layers = lm.model.model.layers
    saved = [layer.self_attn.o_proj.weight.detach().clone() for layer in layers]
    try:
        for layer in layers:
            layer.self_attn.o_proj.weight.data.zero_()
        lengths = (4, 8, 16, 32, 64)
        fixed = lm.score_rows([(text, _row(L, peeval_targets=300)) for L in lengths])
        ppl = [math.exp(-r["ll"] / r["tokens"]) for r in fixed]
        assert max(ppl) / min(ppl) - 1 < 1e-4, ppl
        old = lm.score_rows([(text, {"doc_id": 0, "peeval_window": L, "peeval_protocol": "windows",
                                     "peeval_max_windows": 2}) for L in lengths])  # fmt: skip
        old_ppl = [math.exp(-r["ll"] / r["tokens"]) for r in old]
        assert max(old_ppl) / min(old_ppl) - 1 > 1e-3, old_ppl
    finally:
        for layer, w in zip(layers, saved):
            layer.self_attn.o_proj.weight.data.copy_(w)
