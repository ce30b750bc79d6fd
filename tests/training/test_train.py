"""peeval train / tokenizer: loss goes down for every encoding, resume == uninterrupted,
determinism, tokenizer determinism, schedule and baseline by hand, bad input."""

import csv
import json
import math

import pytest
import torch
from helpers.training import TEXT, TINY
from safetensors.torch import load_file

from peeval.data import mirror_root
from peeval.models.encodings import ENCODINGS
from peeval.training.data import train_bpe, unigram_ppl
from peeval.training.pretrain import flops_per_token, run_train
from peeval.training.schedule import lr_lambda
from peeval.training.state import STATE_FILE


def curve(path):
    with open(path / "train_curve.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("pe", sorted(ENCODINGS))
def test_a_few_steps_lower_the_loss(pe, corpus, tok_dir, tmp_path):
    s = run_train(
        tmp_path, pe, profile="smoke", tokenizer=tok_dir, corpus=corpus, steps=6, lr=1e-2, eval_every=1, **TINY
    )
    rows = curve(tmp_path)
    assert [r["step"] for r in rows] == [str(i) for i in range(1, 7)]
    val = [float(r["val_loss"]) for r in rows]
    assert val[-1] < val[0] - 0.05, val
    assert s["final_val_loss"] == pytest.approx(val[-1], abs=1e-5)
    assert s["final_val_ppl"] == pytest.approx(math.exp(s["final_val_loss"]))
    assert s["pe"] == pe and s["training_length"] == 32 and s["tokens"] == 6 * 4 * 32
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "tokenizer.json").exists()
    assert not (tmp_path / STATE_FILE).exists()


@pytest.mark.parametrize("pe", ["rope", "randpe"])  # randpe draws random positions: RNG state must resume
def test_resume_equals_uninterrupted_and_determinism(pe, corpus, tok_dir, tmp_path):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, steps=6, save_every=3, eval_every=2, **TINY)
    if pe == "randpe":
        kw["pe_options"] = {"max_positions": 256}
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    run_train(a, pe, **kw)
    run_train(c, pe, **kw)
    res = run_train(b, pe, stop_after=4, **kw)  # "killed" after step 4; last saved state: step 3
    assert res == {"interrupted_at": 4}
    assert (b / STATE_FILE).exists() and not (b / "model.safetensors").exists()
    run_train(b, pe, **kw)
    wa, wb, wc = (load_file(str(d / "model.safetensors")) for d in (a, b, c))
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k  # resumed == uninterrupted, bit for bit
        assert torch.equal(wa[k], wc[k]), k  # same seed and data -> same checkpoint

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in rows]

    assert strip(curve(a)) == strip(curve(b))
    d = tmp_path / "d"
    run_train(d, pe, seed=1, **kw)
    assert any(not torch.equal(wa[k], v) for k, v in load_file(str(d / "model.safetensors")).items())


def test_resume_refuses_other_settings(corpus, tok_dir, tmp_path):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, steps=6, save_every=3, **TINY)
    run_train(tmp_path, "rope", stop_after=3, **kw)
    with pytest.raises(ValueError, match=r"belongs to a different run \(settings.lr: 0.003 there, 0.0001 now\)"):
        run_train(tmp_path, "rope", **{**kw, "lr": 1e-4})


def test_tokenizer_training_is_deterministic(tmp_path):
    t1, t2 = train_bpe([TEXT, "other words here"], 300), train_bpe([TEXT, "other words here"], 300)
    assert t1.backend_tokenizer.to_str() == t2.backend_tokenizer.to_str()
    assert len(t1) == 300
    assert t1.decode(t1(TEXT[:200])["input_ids"]) == TEXT[:200]  # byte-level: lossless
    t3 = train_bpe([TEXT], 340)
    assert t3.backend_tokenizer.to_str() != t1.backend_tokenizer.to_str()


@pytest.mark.skipif(mirror_root() is None, reason="the offline data mirror is not there (PEEVAL_DATA_MIRROR)")
def test_tokenizer_cli_and_smoke_train_on_the_mirror(tmp_path):
    from peeval.cli import main

    assert main(["tokenizer", "--out", str(tmp_path / "t1"), "--profile", "smoke"]) == 0
    assert main(["tokenizer", "--out", str(tmp_path / "t2"), "--profile", "smoke"]) == 0
    assert (tmp_path / "t1" / "tokenizer.json").read_bytes() == (tmp_path / "t2" / "tokenizer.json").read_bytes()
    out = tmp_path / "ckpt"
    rc = main(
        ["train", "--pe", "tape", "--profile", "smoke", "--out", str(out), "--tokenizer", str(tmp_path / "t1")]
        + ["--set", "steps=3", "--pe_options", '{"mlp_update": false}']
    )
    assert rc == 0
    s = json.loads((out / "train_summary.json").read_text())
    want = "pe pe_options task profile seed params steps tokens train_time_s tokens_per_s flops_per_token "
    want += "final_val_loss final_val_ppl training_length"
    assert set(want.split()) <= set(s)
    assert s["pe_options"] == {"mlp_update": False} and s["steps"] == 3 and s["unigram_val_ppl"] > 1
    from peeval.training.data import load_tokenizer, tokenizer_fingerprint  # issue 56: what eval checks against

    assert (
        s["tokenizer_hash"]
        == tokenizer_fingerprint(load_tokenizer(out))
        == tokenizer_fingerprint(load_tokenizer(tmp_path / "t1"))
    )
    with open(out / "train_curve.csv") as f:
        assert f.readline().strip() == "step,tokens,lr,train_loss,val_loss,elapsed_s"

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.pe == "tape" and sum(p.numel() for p in model.parameters()) == s["params"]


def test_lr_schedule_by_hand():
    # warmup 4 -> 0.25, 0.5, 0.75, 1.0; then cosine from 1 to 0.1 over 8 more steps
    assert [lr_lambda(s, 4, 12, 0.1) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_lambda(8, 4, 12, 0.1) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway: cos(pi/2) = 0
    assert lr_lambda(12, 4, 12, 0.1) == pytest.approx(0.1)


def test_unigram_ppl_by_hand():
    train = torch.tensor([[0, 0, 0, 1]])  # counts+1: 4, 2, 1 over vocab 3 -> p = 4/7, 2/7, 1/7
    val = torch.tensor([[2, 0, 1]])  # scored tokens 0 and 1 (the first of a block is not predicted)
    want = math.exp(-(math.log(4 / 7) + math.log(2 / 7)) / 2)
    assert unigram_ppl(train, val, 3) == pytest.approx(want)


def test_flops_per_token_by_hand():
    from conftest import tiny_config

    cfg = tiny_config()  # 2 layers, 4 heads x head_dim 8
    assert flops_per_token(cfg, 1000, 16) == 6 * 1000 + 6 * 2 * 16 * 32


def test_bad_input(corpus, tok_dir, tmp_path):
    from peeval.cli import main

    with pytest.raises(ValueError, match="unknown train profile 'huge'"):
        run_train(tmp_path, "rope", profile="huge")
    with pytest.raises(ValueError, match="unknown train setting 'stepz'"):
        run_train(tmp_path, "rope", profile="smoke", stepz=3)
    with pytest.raises(ValueError, match="unknown pe 'ropez'"):
        run_train(tmp_path, "ropez", profile="smoke")
    with pytest.raises(ValueError, match="cannot load the tokenizer"):
        run_train(tmp_path, "rope", profile="smoke", tokenizer=str(tmp_path / "nope"), corpus=corpus)
    with pytest.raises(ValueError, match="unknown pe_options"):
        run_train(tmp_path, "rope", {"bogus": 1}, profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    assert main(["train", "--pe", "rope", "--out", str(tmp_path), "--profile", "smoke", "--set", "nokey"]) == 2
    assert main(["train", "--pe", "rope", "--out", str(tmp_path), "--pe_options", "[1]", "--profile", "smoke"]) == 2
    assert not (tmp_path / "model.safetensors").exists()


def test_diagnostic_rows_score_the_answer_only():
    from peeval.tasks.diagnostics import generators as gen
    from peeval.training.diagnostics import encode_examples

    tok = gen.tokenizer("addition")
    rows = [{"prompt": "1 2 + 3 =", "answer": "4 2", "meta": {}}, {"prompt": "5 + 5 =", "answer": "0 1", "meta": {}}]
    b = encode_examples(rows, tok)
    v = {s: tok.convert_tokens_to_ids(s) for s in ["0", "1", "2", "3", "4", "5", "+", "="]}
    pad, eos = tok.pad_token_id, tok.eos_token_id
    assert b["input_ids"].tolist() == [
        [v["1"], v["2"], v["+"], v["3"], v["="], v["4"], v["2"], eos],
        [v["5"], v["+"], v["5"], v["="], v["0"], v["1"], eos, pad],
    ]
    assert b["labels"].tolist() == [
        [-100] * 5 + [v["4"], v["2"], eos],
        [-100] * 4 + [v["0"], v["1"], eos, -100],
    ]
    assert b["attention_mask"].tolist() == [[1] * 8, [1] * 7 + [0]]
    # the same ids lm-eval scores: prompt, then " " + answer, no special tokens
    assert tok(rows[0]["prompt"] + " " + rows[0]["answer"], add_special_tokens=False)["input_ids"] == [
        v["1"], v["2"], v["+"], v["3"], v["="], v["4"], v["2"]
    ]  # fmt: skip


def test_diagnostic_training(tmp_path):
    from transformers import AutoTokenizer

    s = run_train(tmp_path, "rope", task="addition", profile="smoke", steps=8, lr=1e-2, eval_every=1)
    val = [float(r["val_loss"]) for r in curve(tmp_path)]
    assert val[-1] < val[0]
    assert s["task"] == "addition" and 0.0 <= s["final_val_exact_match"] <= 1.0
    # issue 67: each validation's in-distribution exact match, the convergence gate's unit; the last is the summary's
    em = [float(r["val_exact_match"]) for r in curve(tmp_path)]
    assert len(em) == 8 and all(0.0 <= x <= 1.0 for x in em)
    assert em[-1] == pytest.approx(s["final_val_exact_match"], abs=1e-6)
    tok = AutoTokenizer.from_pretrained(tmp_path)  # saved with the checkpoint for lm-eval's HFLM
    assert tok.convert_ids_to_tokens(tok("1 + 2 =")["input_ids"]) == ["1", "+", "2", "="]
    with pytest.raises(ValueError, match="unknown diagnostic task"):
        run_train(tmp_path / "x", "rope", task="sorting", profile="smoke")
