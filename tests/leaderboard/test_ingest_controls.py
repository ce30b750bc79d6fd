"""Ingest reads a step-0 control's train_summary.json (issue 67) only as `peeval train` writes it: ``control`` is
'step0', ``control_of`` a relative path, 0 steps; anything else is one error naming the file."""

import json

import pytest

from leaderboard.ingest import IngestError, parse_checkpoint_dir

SUMMARY = {"pe": "rope", "pe_options": {}, "params": 1000, "steps": 0, "tokens": 0, "seed": 0, "task": None,
           "final_val_loss": 5.5, "final_val_ppl": 244.7, "control": "step0", "control_of": ".."}  # fmt: skip


def _parse(tmp_path, **change):
    ck = tmp_path / "ck" / "step0"
    ck.mkdir(parents=True)
    (ck / "train_summary.json").write_text(json.dumps({**SUMMARY, **change}))
    return parse_checkpoint_dir(ck, tmp_path)


def test_a_control_is_read_with_its_link(tmp_path):
    (row,) = _parse(tmp_path)["efficiency"]
    assert row["checkpoint"] == "ck/step0" and row["steps"] == 0
    assert json.loads(row["summary"])["control_of"] == ".."


@pytest.mark.parametrize("change", [{"control": "step1"}, {"control_of": "/abs"}, {"control_of": None},
                                    {"steps": 5}])  # fmt: skip
def test_a_malformed_control_is_one_error_naming_the_file(tmp_path, change):
    with pytest.raises(IngestError, match=r"train_summary\.json.*'control'"):
        _parse(tmp_path, **change)
