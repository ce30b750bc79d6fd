"""TAPE table 8 measurement: the formulas on hand-built tensors, Proposition 4.2 (a pure id
shift leaves RoPE and equivariant TAPE unchanged, for any weights) and its failure for the
non-equivariant ablation, and the command's ingestible results file."""

from __future__ import annotations

import json
import math

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

import peeval.models  # noqa: F401
from peeval.evaluation import shift_stability as S


def _model(pe: str, seed: int = 0, **opts):
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(
        "peeval",
        pe=pe,
        pe_options=opts,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=4,
        vocab_size=50,
        bos_token_id=1,
        max_position_embeddings=256,
    )
    m = AutoModelForCausalLM.from_config(cfg).float().eval()
    with torch.no_grad():  # non-trivial position updates (TAPE starts as RoPE: W1 = w_a = 0)
        for p in m.model.pe.parameters():
            p.normal_(0.0, 0.3)
        for layer in m.model.layers:  # peaky attention, so that shifts matter
            layer.self_attn.q_proj.weight.mul_(4.0)
    return m


IDS = torch.randint(2, 50, (2, 24), generator=torch.Generator().manual_seed(1))


def test_tv_distance_by_hand():
    a = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])  # (1, 1, 2, 2)
    same = S.tv_distance(a, a, 0)
    assert same == 0.0
    b = torch.tensor([[[[1.0, 0.0], [0.9, 0.1]]]])
    assert S.tv_distance(b, a, 0) == pytest.approx((0.0 + 0.5 * 0.8) / 2)
    # one extra leading key holding 0.2 of each row's mass; the rest scaled by 0.8
    c = torch.tensor([[[[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.2, 0.4, 0.4]]]])
    # row 1: ½(0.2 + |0.8-1| + 0) = 0.2; row 2: ½(0.2 + 0.1 + 0.1) = 0.2
    assert S.tv_distance(c, a, 1) == pytest.approx(0.2)


def test_rope_dot_products_are_rotations_by_the_offset():
    theta = 0.3
    pos = torch.arange(5.0)
    c, s = torch.cos(theta * pos), torch.sin(theta * pos)
    e = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)  # (N, L=2, R=2): [[c, s], [-s, c]]
    e = e[None, None, :, :, :, None]  # (1, 1, N, 2, 2, M=1)
    p = S.dot_products(e)[0, 0, 0]  # (N, N, 2, 2)
    for i in range(5):
        for j in range(5):
            d = theta * (i - j)
            want = torch.tensor([[math.cos(d), math.sin(d)], [-math.sin(d), math.cos(d)]])
            assert torch.allclose(p[i, j], want, atol=1e-6)
    assert S.pe_dot_diff(e, e, 0) == 0.0


@pytest.mark.parametrize("pe, opts", [("rope", {}), ("tape", {})])
def test_pure_id_shift_leaves_rope_and_tape_unchanged(pe, opts):
    r = S.shift_stability(_model(pe, **opts), IDS)
    layers = sorted({int(k.rsplit("@", 1)[1]) for k in r})
    assert layers == [1, 2, 3, 4]
    for layer in layers:
        assert r[f"attn_diff@shift_ids@{layer}"] < 1e-5
        assert r[f"pe_dot_diff@shift_ids@{layer}"] < 1e-3  # percent
        assert r[f"attn_diff@add_tokens@{layer}"] > 1e-3  # three BOS tokens do take attention


def test_non_equivariant_tape_is_not_shift_invariant():
    eq = S.shift_stability(_model("tape"), IDS)
    neq = S.shift_stability(_model("tape", equivariant=False), IDS)
    assert neq["pe_dot_diff@shift_ids@1"] < 1e-3  # layer 1 still sees the RoPE initialisation
    deepest = 4
    assert neq[f"pe_dot_diff@shift_ids@{deepest}"] > 100 * max(eq[f"pe_dot_diff@shift_ids@{deepest}"], 1e-4)
    assert neq[f"attn_diff@shift_ids@{deepest}"] > 100 * max(eq[f"attn_diff@shift_ids@{deepest}"], 1e-8)


@pytest.mark.parametrize(("pe", "has_state"), [("rope", True), ("tape", True), ("xpos", False), ("alibi", False)])
def test_positional_states_come_from_the_encoding_hook(pe, has_state):
    """The measurement reads ``positional_state`` through ``recording_states`` (no patched methods):
    one state per layer for rope and tape, none for the others; nothing stays attached afterwards."""
    m = _model(pe)
    enc = m.model.pe
    r = S.shift_stability(m, IDS)
    assert any(k.startswith("pe_dot_diff") for k in r) == has_state
    assert enc.recorded_states is None and "transform_qk" not in vars(enc)
    with enc.recording_states() as states, torch.no_grad():
        m(IDS)
    assert len(states) == (m.config.num_hidden_layers if has_state else 0)
    if has_state:  # (B, H, N, L, R, M) with the model's heads and tokens
        assert states[0].shape[:3] == (IDS.shape[0], m.config.num_attention_heads, IDS.shape[1])


def test_absolute_encoding_is_not_shift_invariant_and_has_no_pe_dot():
    r = S.shift_stability(_model("learned"), IDS)
    assert r["attn_diff@shift_ids@1"] > 1e-3
    assert not any(k.startswith("pe_dot_diff") for k in r)


def test_no_bos_is_a_clear_error():
    m = _model("rope")
    m.config.bos_token_id = None
    with pytest.raises(ValueError, match="bos_token_id"):
        S.shift_stability(m, IDS)


def test_command_writes_an_ingestible_results_file(tmp_path):
    pytest.importorskip("tokenizers")
    from peeval.data import mirror_path

    if mirror_path("deepmind/pg19") is None:
        pytest.skip("no PG-19 mirror (local/gutenberg-eval)")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, **{chr(97 + i): 2 + i for i in range(26)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", unk_token="<unk>")
    ck = tmp_path / "ck"
    m = _model("tape")
    m.config.vocab_size = 50
    m.save_pretrained(ck)
    fast.save_pretrained(ck)
    assert S.main(["--checkpoint", str(ck), "--out", str(tmp_path / "out"), "--sequences", "2", "--length", "16"]) == 0
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    res = doc["results"][S.TASK]
    assert res["attn_diff@shift_ids@4,none"] < 1e-5
    assert "pe_dot_diff@add_tokens@2_stderr,none" in res
    assert doc["peeval"]["pe"] == "tape" and doc["peeval"]["model"] == "peeval" and doc["peeval"]["date"]
    ingest = pytest.importorskip("leaderboard.ingest")
    rows = ingest.parse_results_dir(tmp_path / "out", tmp_path)
    got = {(r["task"], r["metric"]) for r in rows["metrics"]}
    assert (S.TASK, "attn_diff@shift_ids@4") in got


def test_command_rejects_a_non_checkpoint(tmp_path, capsys):
    with pytest.raises(SystemExit):
        S.main(["--checkpoint", str(tmp_path), "--out", str(tmp_path / "o")])
    assert "no config.json" in capsys.readouterr().err


def test_command_never_writes_into_the_checkpoint_or_over_an_eval_result(tmp_path, capsys, monkeypatch):
    """Issue 66 item 1: --out DIR replaced a `peeval eval` results.json in DIR, and --out CK wrote into the
    checkpoint; both are one line, exit 2, nothing written."""
    import transformers

    class _Tok:  # no tokenizer or PG-19 is read: the refusal comes first (before, a results.json was written)
        bos_token_id = 1

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Tok())
    monkeypatch.setattr(S, "_sequences", lambda *a, **k: [])
    monkeypatch.setattr(S, "measure_each", lambda *a, **k: {"attn_diff@shift_ids@4": [0.0]})
    ck = tmp_path / "ck"
    _model("rope").save_pretrained(ck)
    before = sorted(p.name for p in ck.iterdir())
    assert S.main(["--checkpoint", str(ck), "--out", str(ck)]) == 2
    assert "--out" in capsys.readouterr().err and sorted(p.name for p in ck.iterdir()) == before
    run = tmp_path / "run"
    run.mkdir()
    theirs = '{"results": {"wikitext": {"word_perplexity,none": 31.5}}}'
    (run / "results.json").write_text(theirs)
    assert S.main(["--checkpoint", str(ck), "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and (run / "results.json").read_text() == theirs


def test_its_own_output_is_known_by_its_manifest(tmp_path, monkeypatch, capsys):
    """Issue 66 (one output policy): --out was judged shift stability's by its results.json's content (its only task);
    now by the manifest the command leaves: rerunning over its own unchanged output works, over an edited one or a
    hand-made results.json that merely looks like one it is refused."""
    import json

    import transformers

    class _Tok:
        bos_token_id = 1

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Tok())
    monkeypatch.setattr(S, "_sequences", lambda *a, **k: [])
    monkeypatch.setattr(S, "measure_each", lambda *a, **k: {"attn_diff@shift_ids@4": [0.25, 0.5]})
    ck = tmp_path / "ck"
    _model("rope").save_pretrained(ck)
    out = tmp_path / "out"
    assert S.main(["--checkpoint", str(ck), "--out", str(out)]) == 0
    assert (out / ".peeval-manifest.json").is_file() and (out / S.SAMPLES_FILE).is_file()
    assert S.main(["--checkpoint", str(ck), "--out", str(out)]) == 0  # its own, unchanged
    doc = json.loads((out / "results.json").read_text())
    (out / "results.json").write_text(json.dumps(doc) + "\n")  # edited by hand
    capsys.readouterr()
    assert S.main(["--checkpoint", str(ck), "--out", str(out)]) == 2
    assert "--out" in capsys.readouterr().err
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "results.json").write_text(json.dumps({"results": {S.TASK: {"attn_diff@shift_ids@4,none": 1.0}}}))
    assert S.main(["--checkpoint", str(ck), "--out", str(fake)]) == 2
    assert json.loads((fake / "results.json").read_text())["results"][S.TASK]["attn_diff@shift_ids@4,none"] == 1.0
