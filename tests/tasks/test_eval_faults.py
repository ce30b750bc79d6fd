"""Issue 42 (evaluation / CLI rows): a NaN checkpoint, bad ``--device`` / ``--batch_size`` /
``--num_fewshot`` / ``dtype``, a ``--run_name`` leaving ``--output_path``, two runs into one folder,
``max_length`` below a perplexity length, short documents under the windows protocol and the
checkpoint hash. Every bad input: exit 2, one line naming it, nothing written."""

import json
import subprocess
import sys

import pytest
import torch
from helpers.checkpoints import save_tiny_checkpoint

from peeval.cli import main

DIAG = ["--tasks", "peeval_diag_flip_flop_test", "--metadata", '{"n": 2}', "--limit", "2"]


@pytest.fixture(scope="module")
def ck(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("ck") / "rope", ["the cat sat on the mat 0123 write read"],
                                pe="rope", vocab_size=280, max_positions=64)  # fmt: skip


def run(capsys, *argv) -> tuple[int, list[str]]:
    rc = main(["eval", *map(str, argv)])
    err = [li for li in capsys.readouterr().err.splitlines() if li.strip() and "%|" not in li]
    return rc, err


def one_line(rc, err, *needles):
    assert rc == 2, err
    assert "Traceback" not in "\n".join(err) and err[-1].startswith("peeval eval: error: "), err
    for n in needles:
        assert n in err[-1], (n, err[-1])


def base(ck, out, *extra):
    return ["--model", "peeval", "--model_args", f"pretrained={ck}", *DIAG, "--device", "cpu", "--output_path", out,
            *extra]  # fmt: skip


def strict_json(text: str):
    """JSON as any other reader parses it: NaN / Infinity are errors."""

    def bad(c):
        raise ValueError(f"non-JSON constant {c}")

    return json.loads(text, parse_constant=bad)


# -- row 1: a diverged (NaN) checkpoint is refused; every JSON peeval writes is valid ---------------------------
def test_a_checkpoint_with_nan_weights_is_refused(ck, tmp_path, capsys):
    import shutil

    from safetensors.torch import load_file, save_file

    nan = tmp_path / "nan"
    shutil.copytree(ck, nan)
    w = load_file(nan / "model.safetensors")
    name = sorted(k for k in w if "layers.1" in k)[0]
    w[name] = torch.full_like(w[name], float("nan"))
    save_file(w, nan / "model.safetensors", metadata={"format": "pt"})
    one_line(*run(capsys, *base(nan, tmp_path / "out")), "NaN or infinite", "diverged")
    assert not (tmp_path / "out").exists()


def test_json_files_never_hold_nan_or_infinity(tmp_path, capsys):
    from peeval._io import dumps_json
    from peeval.cli import _done

    doc = {"loss": float("nan"), "ppl": [float("inf"), 1.5], "ok": 2}
    assert strict_json(dumps_json(doc)) == {"loss": None, "ppl": [None, 1.5], "ok": 2}
    assert strict_json(dumps_json(doc, infinity="inf")) == {"loss": None, "ppl": ["inf", 1.5], "ok": 2}
    _done("train", {"final_val_ppl": float("inf")}, ("final_val_ppl",), "x")
    assert strict_json(capsys.readouterr().out.splitlines()[0]) == {"final_val_ppl": None}


def test_nan_log_likelihood_is_no_perplexity():
    from peeval.tasks.ppl.ppl import _bpb, _ppl

    for f in (_ppl, _bpb):
        with pytest.raises(ValueError, match="NaN"):
            f([(float("nan"), 10)], where="ppl@32")


# -- row 8: eval options ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--device", "garbage"], "--device garbage: allowed cpu, cuda"),
        (["--batch_size", "0"], "--batch_size 0: allowed an integer >= 1"),
        (["--batch_size", "-3"], "--batch_size -3"),
        (["--batch_size", "many"], "--batch_size many"),
        (["--batch_size", "auto:0"], "--batch_size auto:0"),
        (["--num_fewshot", "-1"], "--num_fewshot -1: allowed an integer >= 0"),
        (["--model_args", "pretrained={ck},dtype=garbage"], "dtype='garbage': allowed auto, float32"),
        (["--run_name", ".."], "--run_name '..'"),
        (["--run_name", "../escape"], "--run_name '../escape'"),
        (["--run_name", "a/b"], "--run_name 'a/b'"),
        (["--run_name", "."], "--run_name '.'"),
        # issue 56: silently rewritten before (another folder's name), and the last of two keys won
        (["--run_name", "x<script>"], "--run_name 'x<script>': allowed one folder name of 1-150 letters"),
        (["--run_name", "r" * 300], "--run_name 'rrrrrrrr"),
        (["--model_args", "pretrained={ck},pretrained={ck}2"], "--model_args: pretrained given twice"),
    ],
)
def test_bad_eval_options_are_one_line_and_write_nothing(ck, tmp_path, capsys, flags, needle):
    out = tmp_path / "root" / "out"
    argv = base(ck, out)
    for k, v in zip(flags[::2], flags[1::2]):
        v = v.format(ck=ck)
        if k in argv:
            argv[argv.index(k) + 1] = v
        else:
            argv += [k, v]
    one_line(*run(capsys, *argv), needle)
    assert list(tmp_path.iterdir()) == [], list(tmp_path.rglob("*"))  # nothing written, not even outside out


def test_good_batch_sizes_are_normalised():
    from argparse import Namespace

    from peeval.evaluation.runner import check_eval_args

    for given, want in (("4", 4), (" 2 ", 2), ("auto", "auto"), ("auto:2", "auto:2"), (None, None)):
        a = Namespace(device="cpu", batch_size=given, num_fewshot=0)
        check_eval_args(a)
        assert a.batch_size == want


def test_malformed_params_yaml_is_one_line_for_peeval_data(tmp_path, capsys, monkeypatch):
    (tmp_path / "params.yaml").write_text("data:\n  root: [unclosed\n  mirror: x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PEEVAL_DATA_MIRROR", raising=False)
    rc = main(["data"])
    err = [li for li in capsys.readouterr().err.splitlines() if li.strip()]
    assert rc == 2 and len(err) == 1 and err[0].startswith("peeval data: error: "), err
    assert "params.yaml: not valid YAML (line" in err[0], err


# -- row 3: one results folder, one run at a time ------------------------------------------------------------
def test_a_second_eval_into_a_claimed_folder_is_refused(ck, tmp_path, capsys):
    from peeval._io import claim_dir
    from peeval.evaluation.runner import EVAL_LOCK

    out = tmp_path / "out"
    with claim_dir(out / "r", EVAL_LOCK):  # a first `peeval eval --run_name r` still running (this process)
        one_line(*run(capsys, *base(ck, out, "--run_name", "r")), f"{out / 'r'} is being written by another",
                 "--run_name")  # fmt: skip
        assert sorted(p.name for p in (out / "r").iterdir()) == [EVAL_LOCK]  # the first run's folder untouched
    assert not out.exists()


def test_a_claim_left_by_a_dead_process_is_taken_over(ck, tmp_path, capsys):
    import socket

    from peeval.evaluation.runner import EVAL_LOCK

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "out" / "r").mkdir(parents=True)
    (tmp_path / "out" / "r" / EVAL_LOCK).write_text(f"{socket.gethostname()} {dead.stdout.strip()}")
    rc, err = run(capsys, *base(ck, tmp_path / "out", "--run_name", "r"))
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "out" / "r").iterdir() if p.name.startswith(".")) == []
    assert (tmp_path / "out" / "r" / "results.json").exists()


# -- row 5: max_length below a perplexity length -----------------------------------------------------------------
TEXT = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. " * 3


def test_a_ppl_length_beyond_max_length_is_refused_not_scored_unlimited(ck):
    from lm_eval.api.registry import get_model

    lm = get_model("peeval")(pretrained=str(ck), device="cpu", max_length=16)
    rows = [(TEXT, {"peeval_window": L, "peeval_longest": 64}) for L in (32, 64)]
    with pytest.raises(
        ValueError, match=r"length 64 exceeds the model's max_length=16: set model_args max_length >= 64"
    ):
        lm.score_rows(rows)
    assert lm.score_rows([(TEXT, {"peeval_window": 16, "peeval_longest": 16})])[0]["windows"] > 0


def test_peeval_eval_gives_the_default_ppl_lengths_room():
    from peeval.cli import build_parser
    from peeval.tasks.ppl.ppl import DEFAULT_LENGTHS

    seen = {}

    def fake(args, metadata, limit, model_args, out):
        seen.update(model_args)
        return 0

    import peeval.evaluation.runner as E

    args = build_parser().parse_args(["eval", "--model", "peeval", "--model_args", "pretrained=x", "--tasks",
                                      "peeval_ppl_pg19", "--output_path", "/nonexistent/o"])  # fmt: skip
    real, E._evaluate = E._evaluate, fake
    try:
        E.run_eval(args)
    finally:
        E._evaluate = real
    assert seen["max_length"] == max(DEFAULT_LENGTHS) + 64


# -- row 6: the windows protocol scores the same documents at every length -------------------------------------
def test_windows_protocol_refuses_a_document_shorter_than_the_longest_length(ck):
    from lm_eval.api.registry import get_model

    lm = get_model("peeval")(pretrained=str(ck), device="cpu", max_length=4096)
    n = len(lm.tok_encode(TEXT, add_special_tokens=False))
    long = TEXT * 40
    rows = [(t, {"peeval_window": L, "peeval_longest": 2 * n, "peeval_protocol": "windows", "doc_id": i})
            for i, t in enumerate((long, TEXT)) for L in (8, 2 * n)]  # fmt: skip
    with pytest.raises(ValueError, match=rf"document 1 is {n} tokens of this model, fewer than length {2 * n}"):
        lm.score_rows(rows)
    ok = lm.score_rows(rows[:2])  # the long document alone: a window at every length
    assert all(r["windows"] > 0 for r in ok)


# -- row 9: the checkpoint scored is the checkpoint recorded ------------------------------------------------------
def test_a_checkpoint_retrained_during_its_evaluation_is_not_recorded(ck, tmp_path, capsys, monkeypatch):
    import shutil

    from lm_eval import evaluator
    from safetensors.torch import load_file, save_file

    from peeval.evaluation.runner import checkpoint_hash

    mine = tmp_path / "ck"
    shutil.copytree(ck, mine)
    before = checkpoint_hash(str(mine))
    real = evaluator.simple_evaluate

    def retrained_meanwhile(*a, **k):
        res = real(*a, **k)
        w = load_file(mine / "model.safetensors")
        save_file({n: t + 1 for n, t in w.items()}, mine / "model.safetensors", metadata={"format": "pt"})
        return res

    monkeypatch.setattr(evaluator, "simple_evaluate", retrained_meanwhile)
    one_line(*run(capsys, *base(mine, tmp_path / "out", "--run_name", "r")), "weights changed while it was evaluated")
    assert not (tmp_path / "out").exists()

    shutil.copytree(ck, mine, dirs_exist_ok=True)  # as trained: evaluated, the hash of the weights scored
    monkeypatch.setattr(evaluator, "simple_evaluate", real)
    rc, err = run(capsys, *base(mine, tmp_path / "out", "--run_name", "r"))
    assert rc == 0, err
    prov = json.loads((tmp_path / "out" / "r" / "results.json").read_text())["peeval"]
    assert prov["checkpoint_sha256"] == before


def test_a_config_whose_pe_was_edited_after_training_is_refused(ck, tmp_path, capsys):
    import shutil

    mine = tmp_path / "ck"
    shutil.copytree(ck, mine)
    (mine / "train_summary.json").write_text(json.dumps({"pe": "rope", "pe_options": {}}))
    cfg = json.loads((mine / "config.json").read_text())
    (mine / "config.json").write_text(json.dumps({**cfg, "pe": "nope"}))
    one_line(*run(capsys, *base(mine, tmp_path / "out")), "config.json says pe='nope'", "trained with pe='rope'")
    assert not (tmp_path / "out").exists()
    (mine / "config.json").write_text(json.dumps(cfg))  # restored: evaluated
    assert run(capsys, *base(mine, tmp_path / "out"))[0] == 0


def _swapped_tokenizer(ck, tmp_path, vocab_size: int):
    """A copy of ``ck`` whose training summary records its own tokenizer, then another tokenizer (trained on other
    text, ``vocab_size`` tokens) copied over it."""
    import json
    import shutil

    from transformers import AutoTokenizer

    from peeval.training.data import tokenizer_fingerprint

    d = tmp_path / "ck"
    shutil.copytree(ck, d)
    own = tokenizer_fingerprint(AutoTokenizer.from_pretrained(d))
    (d / "train_summary.json").write_text(json.dumps({"pe": "rope", "seed": 0, "tokenizer_hash": own}))
    other = save_tiny_checkpoint(tmp_path / "other", ["zebra quilt jumps over vexing fog 9876 lorem ipsum"],
                                 pe="rope", vocab_size=vocab_size, max_positions=64)  # fmt: skip
    for f in other.glob("tokenizer*"):
        shutil.copyfile(f, d / f.name)
    shutil.rmtree(other)
    return d


@pytest.mark.parametrize(("vocab_size", "needle"), [(280, "not the one it was trained with"),
                                                    (300, "more than the model's vocab_size")])  # fmt: skip
def test_a_checkpoint_read_with_another_tokenizer_is_one_line(ck, tmp_path, capsys, vocab_size, needle):
    """Issue 56, end to end: a checkpoint evaluated with another tokenizer of the same size copied in scored exit 0
    under the checkpoint's sha256 (bpb 4.80 instead of 4.09); a larger one was an IndexError traceback. Now one line
    naming the tokenizer, exit 2, nothing written."""
    d = _swapped_tokenizer(ck, tmp_path, vocab_size)
    out = tmp_path / "out"
    one_line(*run(capsys, *base(d, out)), needle)
    assert not out.exists()
