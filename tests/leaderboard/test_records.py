"""peeval.records: every string format hand-checked, encode/decode round trips, torch-free."""

import math
import os
import subprocess
import sys

import pytest
from conftest import REPO

from peeval import records as R


def test_task_names():
    assert R.ppl_task("pg19") == "peeval_ppl_pg19"
    assert R.ppl_corpus("peeval_ppl_proof_pile") == "proof_pile"
    assert R.ppl_corpus("peeval_passkey") is None
    assert R.diag_task("flip_flop", "ood_dense") == "peeval_diag_flip_flop_ood_dense"
    assert R.split_diag_task("peeval_diag_selective_copy_ood_sparse") == ("selective_copy", "ood_sparse")
    assert R.split_diag_task("peeval_diag_newtask_test") == ("newtask", "test")
    assert R.split_diag_task("peeval_diag_solo") == ("solo", "test")
    assert R.split_diag_task("peeval_passkey") is None
    for name in R.DIAG_TASKS:
        for split in ("test", "ood_long"):
            assert R.split_diag_task(R.diag_task(name, split)) == (name, split)


def test_diag_tasks_match_the_generators():
    """records' names against what the generators implement (their own defaults table, and a test split each),
    not against ``generators.TASKS``, which is the same registry tuple."""
    from peeval.tasks.diagnostics import generators

    assert tuple(generators.DEFAULTS) == R.DIAG_TASKS
    for name in R.DIAG_TASKS:
        assert generators.generate(name, "test", 2), name


def test_metric_cells_hand_checked():
    assert R.ppl_metric("ppl", 512) == "ppl@512"
    assert R.ppl_metric("windows", 16384) == "windows@16384"
    with pytest.raises(ValueError, match="ppl metric base 'acc'"):
        R.ppl_metric("acc", 512)
    assert R.parse_ppl_metric("bpb@2048") == ("bpb", 2048)
    assert R.parse_ppl_metric("ppl@x") is None and R.parse_ppl_metric("acc@512") is None
    assert R.parse_ppl_metric("ppl") is None
    assert R.passkey_metric(1024, 0.5) == "acc@1024@0.5"
    assert R.passkey_metric(512, 0.0) == "acc@512@0.0"
    assert R.parse_passkey_metric("acc@1024@0.25") == ("1024", "0.25")
    assert R.parse_passkey_metric("acc") is None and R.parse_passkey_metric("acc@3x5") is None
    assert R.addition_metric(3, 5) == "acc@3x5"
    assert R.addition_cell(12, 1) == "12x1"
    assert R.parse_addition_cell("12x1") == (12, 1)
    assert R.parse_addition_cell("all") is None and R.parse_addition_cell("3x") is None
    assert R.parse_diag_cell_metric("acc@3x5") == "3x5"
    assert R.parse_diag_cell_metric("acc") is None and R.parse_diag_cell_metric("read_acc") is None
    assert R.shift_metric("attn_diff", "shift_ids", 3) == "attn_diff@shift_ids@3"
    assert R.parse_shift_metric("pe_dot_diff@add_tokens@12") == ("pe_dot_diff", "add_tokens", 12)
    assert R.parse_shift_metric("attn_diff@sideways@1") is None
    assert R.metric_base("acc@512@0.5") == "acc" and R.metric_base("read_acc") == "read_acc"
    assert R.is_cell("ppl@512") and not R.is_cell("seq_acc")
    assert R.result_key("acc") == "acc,none" and R.stderr_key("acc", "strict") == "acc_stderr,strict"
    assert R.parse_result_key("exact_match,strict-match") == ("exact_match", "strict-match")
    assert R.parse_result_key("acc_stderr,none") is None and R.parse_result_key("alias") is None


@pytest.mark.parametrize("base", R.PPL_BASES)
@pytest.mark.parametrize("length", [2, 512, 16384])
def test_ppl_round_trip(base, length):
    assert R.parse_ppl_metric(R.ppl_metric(base, length)) == (base, length)


@pytest.mark.parametrize("length,depth", [(512, 0.0), (4096, 0.25), (1, 1.0)])
def test_passkey_round_trip(length, depth):
    L, d = R.parse_passkey_metric(R.passkey_metric(length, depth))
    assert (int(L), float(d)) == (length, depth)


def test_addition_and_shift_round_trip():
    for a, b in [(1, 1), (3, 12)]:
        assert R.parse_addition_cell(R.parse_diag_cell_metric(R.addition_metric(a, b))) == (a, b)
    for base in R.SHIFT_BASES:
        for shift in R.SHIFTS:
            assert R.parse_shift_metric(R.shift_metric(base, shift, 7)) == (base, shift, 7)


def test_labels_hand_checked():
    assert R.encoding_label("rope", None) == "rope" and R.encoding_label("rope", {}) == "rope"
    assert R.encoding_label("tape", {"n_heads": 2, "equivariant": False}) == "tape(equivariant=False,n_heads=2)"
    assert R.adapt_label("pi") == "adapt:pi"
    assert R.external_name("hf", "gpt2") == "hf:gpt2" and R.external_name("hf", None) == "hf"
    assert R.published_name("rope", "gpu") == "rope @gpu"
    assert R.CURVE_COLUMNS == ("step", "tokens", "lr", "train_loss", "val_loss", "elapsed_s")


def test_provenance_round_trip_keeps_order_and_unknown_keys():
    d = {"peeval_version": "0.1", "git_commit": None, "model": "peeval", "model_args": {"pretrained": "c"},
         "checkpoint": "c", "checkpoint_sha256": "ab", "pe": "rope", "pe_options": {}, "rope_parameters": None,
         "training_length": 128, "max_length": 256, "protocol": {"ppl": "disjoint windows", "metadata": {}},
         "dtype": "torch.float32", "seed": 0, "limit": None, "device": "cpu", "world_size": 1,
         "torch_threads": 1, "versions": {"torch": "2"}, "command": ["peeval"],
         "date": "2026-01-01T00:00:00+00:00", "data": {"t": [{"source": "hub", "location": "a/b"}]},
         "cpu": {"model": "AMD EPYC", "torch_capability": "AVX2"}, "run_kind": "pretrain",
         "tokenizer_hash": "43b1ed464b26afb4", "model_params": 8,
         "tokenizer": {"name": "SmolLM2-135M", "vocab_size": 49152}}  # fmt: skip
    p = R.Provenance.from_json(d)
    assert p.to_json() == d and list(p.to_json()) == list(d)
    newer = {**d, "future": 1}
    assert R.Provenance.from_json(newer).to_json() == newer
    old = R.Provenance.from_json({"model": "peeval", "date": "x"})
    assert old.pe is None and old.to_json()["model"] == "peeval"


def test_mean_stderr_hand_checked():
    # xs = 1, 2, 3: mean 2, sample variance ((1+0+1)/2) = 1, stderr 1/sqrt(3)
    m, se = R.mean_stderr([1.0, 2.0, 3.0])
    assert m == 2.0 and se == pytest.approx(1 / math.sqrt(3), rel=1e-15)
    assert R.mean_stderr([5.0]) == (5.0, None)
    assert R.seed_stderr([2.0, 2.0]) == 0.0
    assert math.isnan(R.seed_stderr([math.nan, 1.0])) and math.isnan(R.seed_stderr([math.inf, 1.0]))
    # float64 against the textbook formula on values with a spread of 1e-9
    xs = [0.1 + 1e-9 * i for i in range(5)]
    m = sum(xs) / 5
    assert R.seed_stderr(xs) == pytest.approx(math.sqrt(sum((x - m) ** 2 for x in xs) / 4 / 5), rel=1e-6)
    with pytest.raises(ValueError):
        R.mean_stderr([])


def test_fmt_number_hand_checked():
    assert R.fmt_number(None) == "–"
    assert R.fmt_number(float("nan")) == "nan"
    assert R.fmt_number(float("inf")) == "inf" and R.fmt_number(-math.inf) == "-inf"
    assert R.fmt_number(0.123456) == "0.1235"
    assert R.fmt_number(12.5) == "12.5"
    assert R.fmt_number(0.0) == "0"
    assert R.fmt_number(1234567.0) == "1.235e+06"
    assert R.fmt_number(0.00012) == "1.200e-04"
    assert R.fmt_number(0.0123, 2) == "0.012"
    assert R.fmt_number(7) == "7" and R.fmt_number("x") == "x"


def test_records_and_its_leaderboard_readers_are_torch_free():
    code = (
        "import sys, peeval.records, leaderboard.ingest, leaderboard.site, leaderboard.site.claims_page; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})


def test_the_site_and_the_claims_page_share_one_number_format():
    from leaderboard import site
    from leaderboard.site import claims_page

    assert claims_page.fmt_number is R.fmt_number
    for v in (None, math.nan, math.inf, 0.0, 0.5, 123456.0, 1e7, 2e-4, 3):
        assert site.fmt(v) == R.fmt_number(v)


def test_clip_text_keeps_head_and_tail_and_cutting_twice_changes_nothing():
    assert R.clip_text("abcdef", 6) == "abcdef"
    cut = R.clip_text("abcdefghij", 4)  # 10 characters to 2 + 2 around the marker naming the 6 dropped
    assert cut == "ab[... 6 characters ...]ij"
    assert R.clip_text(cut, 4) == cut
    assert R.clip_text(cut, 4 * 10) == cut  # a larger limit: shorter than it, left as it is


def test_samples_files_the_store_and_published_samples_cut_texts_the_same_way():
    from leaderboard import ingest
    from peeval.evaluation import runner as evaluation

    long = "x" * 5000 + "y" * 5000
    assert ingest.clip(long) == R.clip_text(long, ingest.TEXT_LIMIT)
    assert ingest.clip(ingest.clip(long)) == ingest.clip(long)
    short = evaluation.clip_texts({"doc": [long]})["doc"][0]
    assert short == R.clip_text(long, evaluation.SAMPLE_TEXT_LIMIT) and ingest.clip(short) == short
