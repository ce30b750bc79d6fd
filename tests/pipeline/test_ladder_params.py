"""Issue 43's ladder of sizes in the parameter files: an encoding's entries at another model shape (a rung) are
their own leaderboard row, so their ``set`` may differ from the default entries' in the shape and its budget
only; entries of one shape stay seeds of one row (same ``set``), and the encodings of one rung share its budget.
A bad entry is one line naming the key, exit 2, nothing written."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import common
import pytest
import yaml
from pipeline_params import load, render

REPO = Path(__file__).resolve().parents[2]
#: the smoke profile's shape halved in width (4 -> 2 heads of 8, SwiGLU 32): a rung
RUNG = {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_key_value_heads": 2, "steps": 4}


def _with(**entries) -> dict:
    p = copy.deepcopy(yaml.safe_load((REPO / "params" / "smoke.yaml").read_text()))
    p["encodings"].update(entries)
    return p


def _entry(pe: str, settings: dict, seed: int | None = None) -> dict:
    return {"pe": pe, "pe_options": {}, "set": dict(settings), **({} if seed is None else {"seed": seed})}


def test_a_rung_is_accepted_beside_the_default_entries(tmp_path):
    p = _with(**{"rope-d16": _entry("rope", RUNG), "rope-d16-s1": _entry("rope", RUNG, 1),
                 "tape-d16": _entry("tape", RUNG)})  # fmt: skip
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    _, typed = load(tmp_path / "params.yaml")
    assert typed.train_overrides("rope-d16") == RUNG and typed.train_overrides("rope") == {}
    assert typed.seed_of("rope-d16-s1") == 1 and typed.seed_of("rope-d16") == 0  # seed 0 at both shapes


BAD = [
    # same shape as rope-d16, another learning rate: the two would be averaged as seeds of one row
    ({"rope-d16": _entry("rope", RUNG), "rope-d16-s1": _entry("rope", {**RUNG, "lr": 1e-3}, 1)},
     "encodings.rope-d16-s1.set", "same pe, pe_options and model shape"),
    # another shape and another learning rate: a rung differs in its shape and budget only
    ({"rope-d16": _entry("rope", {**RUNG, "lr": 1e-3})}, "encodings.rope-d16.set", "in more than the model shape"),
    # one rung, two budgets: PoPE vs RoPE at this size would compare different step counts
    ({"rope-d16": _entry("rope", RUNG), "tape-d16": _entry("tape", {**RUNG, "steps": 5})},
     "encodings.tape-d16.set.steps", "same budget"),
    # one shape, one seed, twice
    ({"rope-d16": _entry("rope", RUNG), "rope-d16-b": _entry("rope", RUNG, 0)}, "encodings.rope-d16-b.seed",
     "the same run as encodings.rope-d16"),
]  # fmt: skip


@pytest.mark.parametrize("entries,key,why", BAD, ids=[b[1] for b in BAD])
def test_a_bad_rung_is_one_line_exit_2_nothing_written(entries, key, why, tmp_path, monkeypatch, capsys):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_with(**entries), sort_keys=False))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        common.params()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err and why in err, err
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]


def test_cpu_claims_ladder_and_its_rendered_params():
    """params/cpu-claims.yaml: 3 seeds of rope, pope, tape, cope, alibi, nope at one rung (one ``set``, written
    once as a YAML anchor), in params.yaml written out in full (no alias DVC or a reader would have to follow)."""
    raw, typed = load(REPO / "params" / "cpu-claims.yaml")
    rung = {k: e for k, e in typed.encodings.items() if e.set}
    assert sorted({e.pe for e in rung.values()}) == ["alibi", "cope", "nope", "pope", "rope", "tape"]
    assert len(rung) == 18 and len({typed.seed_of(k) for k in rung}) == 3
    assert {"hidden_size": 32, "steps": 329}.items() <= next(iter(rung.values())).set.items()
    text = render(REPO / "params" / "cpu-claims.yaml")
    assert "&" not in text.split("\n", 2)[2] and "*id" not in text
    assert yaml.safe_load(text)["encodings"] == raw["encodings"]
