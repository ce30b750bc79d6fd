"""``peeval bench --train`` (issue 46): the smoke profile's model on the CPU, every row's numbers
consistent, a failing entry a row of its own, the back-ends that ran visible, the profile read
without pydantic."""

import builtins
import json
import sys

import pytest
import torch

from peeval import cli
from peeval.bench import train as train_bench


def bench(tmp_path, *args):
    out = tmp_path / "b.json"
    argv = ["bench", "--train", "--profile", "smoke", "--steps", "2", "--warmup", "1", "--json", str(out),
            "--md", str(tmp_path / "b.md"), *args]  # fmt: skip
    assert cli.main(argv) == 0
    return json.loads(out.read_text())["rows"]


class FakeClock:
    """``train_bench``'s clock: it moves only when an optimizer step runs, by a duration chosen per entry, so
    every number of a row is known before the bench runs (not recomputed from the row: issue 60)."""

    def __init__(self):
        self.now, self.step_s = 0.0, None

    def perf_counter(self):
        return self.now


def test_train_bench_rows(tmp_path, monkeypatch):
    clock = FakeClock()
    step_s = {"rope": 0.25, "t5@eager": 0.75, "fire": 0.5}  # seconds one training step of each entry "takes"
    monkeypatch.setattr(train_bench, "time", clock)
    real_build, real_step = train_bench.build, torch.optim.AdamW.step

    def build(entry, *a, **k):
        clock.step_s = step_s[entry]
        return real_build(entry, *a, **k)

    def opt_step(self, *a, **k):
        clock.now += clock.step_s
        return real_step(self, *a, **k)

    monkeypatch.setattr(train_bench, "build", build)
    monkeypatch.setattr(torch.optim.AdamW, "step", opt_step)
    rows = bench(tmp_path, "--pe", "t5@eager", "fire", "--peak_flops", "1e12")
    by = {r["entry"]: r for r in rows}
    assert list(by) == ["rope", "t5@eager", "fire"]  # rope first, added
    assert by["t5@eager"]["backends"] == ["eager"] and by["rope"]["backends"] == ["sdpa"]
    assert by["fire"]["backends"] == ["blocked"]  # the CPU default
    from peeval.models import PeevalConfig, PeevalForCausalLM

    cfg = PeevalConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=4, vocab_size=384, tie_word_embeddings=True, pe="rope")  # fmt: skip
    params = sum(p.numel() for p in PeevalForCausalLM(cfg).parameters())
    r = by["rope"]
    assert r["params"] == params and r["tokens_per_step"] == 4 * 64  # smoke: batch 4 x 64
    assert r["steps_timed"] == 2 and r["compiled"] is False  # --steps 2; auto: eager on the CPU
    assert r["step_s"] == 0.25 and r["first_step_s"] == 0.25  # one optimizer step per timed step
    assert r["ratio_to_rope"] == 1.0
    assert r["tokens_per_s"] == 1024.0  # 256 tokens in 0.25 s
    assert r["model_flops_share"] == pytest.approx(6 * params * 1024.0 / 1e12)
    assert by["t5@eager"]["step_s"] == 0.75 and by["t5@eager"]["ratio_to_rope"] == 3.0
    assert by["t5@eager"]["tokens_per_s"] == pytest.approx(256 / 0.75)
    assert by["fire"]["ratio_to_rope"] == 2.0 and by["fire"]["tokens_per_s"] == 512.0
    md = (tmp_path / "b.md").read_text()
    assert "| t5@eager | 750.0 | 3.00 | 341 |" in md
    failed = train_bench.format_table(
        train_bench.finish([{"entry": "t5@flex", "error": "InductorError: x"}], None), "h"
    )
    assert "| t5@flex | – |" in failed and "FAILED" in failed  # an entry that fails at run time is a row


def test_train_bench_shows_a_fallback(tmp_path, caplog, monkeypatch):
    """fire@flex on the CPU under autograd: FlexAttention cannot run, the row says what did."""
    import peeval._log as plog

    monkeypatch.setattr(plog, "_said", set())
    rows = bench(tmp_path, "--pe", "fire@flex")
    assert rows[1]["entry"] == "fire@flex" and rows[1]["backends"] == ["blocked"]
    assert any("attn_backend='flex' cannot run for pe='fire'" in r.getMessage() for r in caplog.records)


def test_bench_needs_train(capsys):
    assert cli.main(["bench", "--profile", "smoke"]) == 2
    assert "only --train" in capsys.readouterr().err


def test_profile_without_pydantic(monkeypatch):
    from peeval.training.profiles import get_profile

    want = {k: get_profile("train", "gpu")[k] for k in (*train_bench.SHAPE_KEYS, "batch_size", "seq_len")}
    real_import = builtins.__import__

    def no_pydantic(name, *a, **k):
        if name.startswith("pydantic") or name.endswith("training.profiles") or name == "profiles":
            raise ImportError(name)
        return real_import(name, *a, **k)

    for mod in [m for m in sys.modules if m.endswith("training.profiles")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_pydantic)
    got = train_bench.profile_settings("gpu")
    assert "peeval.training.profiles" not in sys.modules  # read from the yaml alone
    assert {k: got[k] for k in want} == want
    assert want["hidden_size"] == 512 and want["num_hidden_layers"] == 8  # the gpu profile of profiles.yaml
    with pytest.raises(ValueError, match="unknown train profile 'gpuu'"):
        train_bench.profile_settings("gpuu")


def test_peak_flops():
    assert train_bench.peak_flops("cpu", None) is None and train_bench.peak_flops("cpu", 5.0) == 5.0
    if torch.cuda.is_available():  # pragma: no cover
        assert train_bench.peak_flops("cuda", None) in (None, 989e12)


@pytest.mark.parametrize(
    "bad, says",
    [
        (["--steps", "0"], "--steps 0: allowed an integer >= 1"),
        (["--warmup", "-1"], "--warmup -1: allowed an integer >= 0"),
        (["--batch_size", "-1"], "--batch_size -1: allowed an integer >= 1"),
        (["--pe", "nosuch"], "--pe 'nosuch': allowed pe[@backend]"),
        (["--pe", "fire@nope"], "--pe 'fire@nope': allowed pe[@backend]"),
        (["--device", "garbage"], "--device 'garbage': allowed cpu"),
        (["--entry_seconds", "0"], "--entry_seconds and --peak_flops: allowed a number > 0"),
    ],
)
def test_bad_bench_options_are_one_line_and_write_nothing(bad, says, tmp_path, capsys):
    """Before, each ran and every entry became a FAILED row (exit 0)."""
    from peeval.cli import main

    out = tmp_path / "bench.json"
    assert main(["bench", "--train", "--profile", "smoke", "--json", str(out), *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not out.exists()
