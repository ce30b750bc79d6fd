"""Issue 68's Done-when, in a browser: two checkpoints of yours with different tokenizers and sizes, and a
GPT-2-style Hugging Face checkpoint, each scored on this CPU with `peeval eval --like cpu` (the GPT-2 with `--model
hf`), put on the cpu board as `make site SITE_PROFILE=cpu MINE=...` does. Chromium then sees two separate rows, each
on its tokenizer's perplexity chart, both in the front page's picture; the GPT-2 row with bits per byte; and every
published value as before. Slow: three full scorings of the board's protocol and two site builds (minutes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from helpers.browser import CHROMIUM, CHROMIUM_FLAGS
from helpers.data_mirror import MIRROR, needs_mirror

from leaderboard.ingest import ingest
from leaderboard.site import build_site

PUBLISHED_CPU = Path(REPO) / "leaderboard" / "published" / "cpu"

#: `peeval` as its console script runs it, but from this checkout (run with cwd = the repository root)
PEEVAL = "import sys; from peeval.cli import main; sys.exit(main())"


def _peeval_model(out: Path, profile: str, hidden: int, trained: int) -> Path:
    """An untrained TAPE checkpoint with ``profile``'s own tokenizer (`peeval tokenizer --profile ...`)."""
    import torch

    from peeval.models import PeevalConfig, PeevalForCausalLM
    from peeval.training.data import profile_tokenizer
    from peeval.training.profiles import get_profile

    tok = profile_tokenizer(get_profile("train", profile))
    torch.manual_seed(0)
    cfg = PeevalConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=1,
                       num_attention_heads=2, max_position_embeddings=trained, pe="tape",
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    PeevalForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _gpt2(out: Path) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    tok = GPT2TokenizerFast(vocab=str(MIRROR / "tokenizers/gpt2/vocab.json"),
                            merges=str(MIRROR / "tokenizers/gpt2/merges.txt"))  # fmt: skip
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=4160, n_embd=8, n_layer=1, n_head=2)).save_pretrained(
        out
    )
    tok.save_pretrained(out)
    return out


def _score(ck: Path, out: Path, run: str, *model: str) -> str:
    """`peeval eval --like cpu` as a user runs it, in a process that sees no GPU; its stdout."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", PEEVAL, "eval", "--like", "cpu", *model, "--model_args",
           f"pretrained={ck}", "--output_path", str(out), "--run_name", run]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    return p.stdout


def _site(db: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "pipelines/claims.py", "--db", str(db), "--source", "published/cpu"], cwd=REPO,
                   check=True, capture_output=True)  # fmt: skip
    return build_site(db, out)


@pytest.mark.slow
@needs_mirror("local", "gutenberg-eval")
@needs_mirror("local", "gutenberg-train")
@needs_mirror("tokenizers", "gpt2")
def test_your_runs_on_the_cpu_board_in_chromium(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (docs/testing.md: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    out = tmp_path / "results"
    said = {
        "mine-cpu": _score(_peeval_model(tmp_path / "ck-cpu", "cpu", 48, 256), out, "mine-cpu"),
        "mine-smoke": _score(_peeval_model(tmp_path / "ck-smoke", "smoke", 32, 64), out, "mine-smoke"),
        "mine-gpt2": _score(_gpt2(tmp_path / "ck-gpt2"), out, "mine-gpt2", "--model", "hf"),
    }
    line = {k: next(x for x in v.splitlines() if x.startswith("--like cpu: differs")) for k, v in said.items()}
    assert "tokenizer (" not in line["mine-cpu"] and "size (" in line["mine-cpu"]  # the board's tokenizer, not size
    assert "tokenizer (384 tokens" in line["mine-smoke"] and "training length (64 vs 256)" in line["mine-smoke"]
    assert "tokenizer (50,257 tokens" in line["mine-gpt2"]

    db = tmp_path / "site" / "peeval.duckdb"
    db.parent.mkdir()
    ingest([PUBLISHED_CPU], db)  # `make site SITE_PROFILE=cpu`
    before = _site(db, tmp_path / "before")
    ingest([PUBLISHED_CPU, out / "mine-cpu", out / "mine-smoke", out / "mine-gpt2"], db)  # ... MINE="results/..."
    after = _site(db, tmp_path / "after")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(after.as_uri())
            vs = page.locator("#vs_rope tbody tr")
            names = [vs.nth(i).locator("td").first.inner_text().split("\n")[0] for i in range(vs.count())]
            assert names.count("mine-cpu") == 1 and names.count("mine-smoke") == 1, names  # two rows, not merged
            assert not any(n.startswith("tape ·") or n == "tape" for n in names)
            smoke = vs.filter(has_text="mine-smoke").first.inner_text()
            assert "per byte (another tokenizer)" in smoke, smoke
            picture = page.locator("#picture svg.chart").first.text_content()
            assert "mine-cpu (yours)" in picture and "mine-smoke (yours, per byte)" in picture, picture

            def rows(table: str, url: Path) -> dict[str, list[str]]:
                page.goto(url.as_uri())
                trs = page.locator(f"#{table} tbody tr")
                got = {}
                for i in range(trs.count()):
                    cells = trs.nth(i).locator("td").all_inner_texts()
                    got[cells[0].split("\n")[0]] = cells[1:]
                heads = page.locator(f"#{table} thead th").all_inner_texts()[1:]
                return {n: dict(zip(heads, c)) for n, c in got.items()}

            ext_before, ext_after = rows("extension", before), rows("extension", after)
            gpt2 = ext_after["mine-gpt2"]
            assert [h for h, v in gpt2.items() if "bpb@" in h and v.strip() not in ("–", "")], gpt2  # bits per byte
            for name, cells in ext_before.items():  # every published value kept, under its own heading
                for head, value in cells.items():
                    if value.strip() not in ("–", ""):
                        assert ext_after[name][head] == value, (name, head)
            board_before, board_after = rows("leaderboard", before), rows("leaderboard", after)
            assert all(board_after[n] == c for n, c in board_before.items())

            page.goto((after.parent / "ppl.html").as_uri())
            charts = page.locator("svg.chart")
            texts = [charts.nth(i).text_content() for i in range(charts.count())]
            ppl = [t for t in texts if ": ppl" in t]
            smoke_charts = [t for t in ppl if "mine-smoke" in t]
            cpu_charts = [t for t in ppl if "mine-cpu" in t]
            assert smoke_charts and all("384 tokenizer" in t and "tape @cpu" not in t for t in smoke_charts)
            assert cpu_charts and all("bpe 512 tokenizer" in t and "mine-smoke" not in t for t in cpu_charts)
            assert all("mine-gpt2" not in t for t in smoke_charts + cpu_charts)
        finally:
            browser.close()
