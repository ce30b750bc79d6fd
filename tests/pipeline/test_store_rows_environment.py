"""A reference store compares results, not environments (issue 25)."""

import json

from helpers import store_rows


def _tables(transformers: str, ppl: float) -> dict:
    versions = {"torch": "2.13.0+cpu", "transformers": transformers, "lm_eval": "0.4.13"}
    run = {"run": "pretrain|ck|r.json", "transformers_version": transformers, "torch_version": "2.13.0+cpu",
           "lm_eval_version": "0.4.13", "params": {"seed": 0, "versions": versions}, "pe": "rope"}  # fmt: skip
    return {"runs": [run], "metrics": [{"run": "pretrain|ck|r.json", "metric": "ppl", "value": ppl}]}


def test_versions_are_no_part_of_the_comparison(tmp_path):
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(_tables("5.23.0", 12.5)))
    now = store_rows.read(ref)
    assert "transformers_version" not in now["runs"][0] and "versions" not in now["runs"][0]["params"]
    other = tmp_path / "now.json"
    other.write_text(json.dumps(_tables("5.24.0", 12.5)))
    assert store_rows.diff(store_rows.read(ref), store_rows.read(other)) == []


def test_a_moved_number_still_shows(tmp_path):
    ref, other = tmp_path / "ref.json", tmp_path / "now.json"
    ref.write_text(json.dumps(_tables("5.23.0", 12.5)))
    other.write_text(json.dumps(_tables("5.24.0", 13.5)))
    problems = store_rows.diff(store_rows.read(ref), store_rows.read(other))
    assert len(problems) == 1 and "value: 12.5 -> 13.5" in problems[0]
