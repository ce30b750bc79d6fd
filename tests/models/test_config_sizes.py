"""Issue 56: a config.json with `vocab_size: -5` or `num_attention_heads: 0` was a RuntimeError or a
ZeroDivisionError deep in the model's construction; now one line naming the field, exit 2."""

import json
import re

import pytest
from conftest import tiny_model

from peeval.cli import main
from peeval.models import PeevalConfig


@pytest.mark.parametrize(
    ("sizes", "said"),
    [
        ({"vocab_size": -5}, "vocab_size=-5: allowed a whole number >= 1"),
        ({"num_attention_heads": 0}, "num_attention_heads=0: allowed a whole number >= 1"),
        ({"num_hidden_layers": 1.5}, "num_hidden_layers=1.5: allowed a whole number >= 1"),
        ({"num_attention_heads": 4, "num_key_value_heads": 3}, "is not a multiple of num_key_value_heads=3"),
        ({"hidden_size": 30, "num_attention_heads": 4}, "hidden_size=30 is not a multiple of num_attention_heads=4"),
    ],
)
def test_a_bad_size_is_one_error(sizes, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        PeevalConfig(**sizes)


def test_a_checkpoint_with_a_bad_size_is_one_line(tmp_path, capsys):
    ckpt = tmp_path / "ck"
    tiny_model("rope").save_pretrained(ckpt)
    good = json.loads((ckpt / "config.json").read_text())
    for field, value in (("vocab_size", -5), ("num_attention_heads", 0)):
        (ckpt / "config.json").write_text(json.dumps({**good, field: value}))
        capsys.readouterr()
        assert main(["export", str(ckpt), str(tmp_path / "out")]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]
        assert len(err) == 1 and f"config {field}={value}: allowed a whole number >= 1" in err[0], err
        assert not (tmp_path / "out").exists()


def test_export_of_truncated_weights_is_one_line(tmp_path, capsys):
    """Issue 56: `peeval export` of a truncated safetensors was a SafetensorError traceback."""
    ckpt = tmp_path / "ck"
    tiny_model("rope").save_pretrained(ckpt)
    w = ckpt / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    capsys.readouterr()
    assert main(["export", str(ckpt), str(tmp_path / "out")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]
    assert len(err) == 1 and "model.safetensors: cannot read the weights, truncated or corrupt" in err[0], err
    assert not (tmp_path / "out").exists()
