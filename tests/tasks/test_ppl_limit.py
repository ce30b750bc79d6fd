"""Issue 30: ``--limit 1`` with two ppl lengths scored only the first length (exit 0), though the
docstring promised every length is kept. A limit now keeps whole documents, every length scored."""

import json

import pytest
from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import needs_mirror


@needs_mirror("local", "gutenberg-eval")
@pytest.mark.parametrize("limit", ["1", "3"])
def test_limit_never_drops_a_length(limit, tmp_path, capsys):
    from peeval.cli import main

    ck = save_tiny_checkpoint(tmp_path / "rope", ["the cat sat on the mat 0123456789 and the dog ran"], pe="rope",
                              vocab_size=300, max_positions=64)  # fmt: skip
    md = {"lengths": [16, 32], "protocol": "windows", "max_windows": 1}
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", "peeval_ppl_pg19", "--device",
            "cpu", "--limit", limit, "--metadata", json.dumps(md), "--output_path", str(tmp_path / "o")]  # fmt: skip
    rc = main(argv)
    assert rc == 0, capsys.readouterr().err[-2000:]
    (res,) = (tmp_path / "o").glob("*/results.json")
    scores = json.loads(res.read_text())["results"]["peeval_ppl_pg19"]
    assert {"ppl@16,none", "ppl@32,none"} <= set(scores), sorted(scores)
    windows = {L: scores[f"windows@{L},none"] for L in (16, 32)}
    docs = 1 if limit == "1" else 2  # 3 rows of (document, length) round up to 2 whole documents
    assert windows == {16: docs, 32: docs}, windows


@needs_mirror("local", "gutenberg-eval")
def test_a_generic_hf_model_is_refused_before_any_scoring(tmp_path, capsys, monkeypatch):
    """Issue 30: ``--model hf`` on a ppl task scored every whole document, then died in process_results.
    Now its first loglikelihood_rolling call refuses the window requests: one line, exit 2, no result. Since issue
    68 ``peeval eval --model hf`` is peeval's own HFLM (``peeval-hf``, exact windows); lm-eval's other name for
    its generic HFLM, ``huggingface``, is still refused this way."""
    from lm_eval.models.huggingface import HFLM

    from peeval.cli import main

    scored = []
    monkeypatch.setattr(HFLM, "_loglikelihood_tokens", lambda self, *a, **k: scored.append(1) or [])
    ck = save_tiny_checkpoint(tmp_path / "rope", ["the cat sat on the mat 0123456789 and the dog ran"], pe="rope",
                              vocab_size=300, max_positions=64)  # fmt: skip
    argv = ["eval", "--model", "huggingface", "--model_args", f"pretrained={ck}", "--tasks", "peeval_ppl_pg19",
            "--device", "cpu", "--limit", "1", "--metadata", '{"lengths": [16]}', "--output_path",
            str(tmp_path / "o")]  # fmt: skip
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [li for li in err.splitlines() if li.startswith("peeval eval: error: ")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert "peeval_ppl_pg19" in lines[0] and "not a generic lm-eval model" in lines[0], lines[0]
    assert scored == [] and not (tmp_path / "o").exists()
