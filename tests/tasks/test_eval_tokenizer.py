"""Issue 56: the tokenizer scored with is checked before anything is scored and recorded beside the weights'
sha256: a checkpoint read with another tokenizer of the same size copied in (bpb 4.80 instead of 4.09, ingested
as that checkpoint) and a tokenizer larger than the model's vocabulary (an IndexError) are one line each."""

import json
import types

import pytest

from peeval.evaluation.provenance import check_tokenizer
from peeval.training.data import tokenizer_fingerprint


class _Tok:
    """A tokenizer as check_tokenizer sees one: its vocabulary (no fast backend: hashed by its vocabulary)."""

    def __init__(self, words):
        self.vocab = {w: i for i, w in enumerate(words)}

    def get_vocab(self):
        return dict(self.vocab)

    def __len__(self):
        return len(self.vocab)


def _lm(tok, vocab_size, model_type="peeval"):
    cfg = types.SimpleNamespace(vocab_size=vocab_size, model_type=model_type)
    return types.SimpleNamespace(tokenizer=tok, model=types.SimpleNamespace(config=cfg))


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path):
    tok = _Tok([f"w{i}" for i in range(10)])
    with pytest.raises(ValueError, match="10 tokens, more than the model's vocab_size 8"):
        check_tokenizer(_lm(tok, 8), {"pretrained": str(tmp_path)})
    assert check_tokenizer(_lm(tok, 10), {"pretrained": str(tmp_path)}) == tokenizer_fingerprint(tok)


def test_another_tokenizer_of_the_same_size_is_refused_and_the_right_one_recorded(tmp_path):
    trained, swapped = _Tok(["a", "b", "c"]), _Tok(["x", "y", "z"])
    (tmp_path / "train_summary.json").write_text(json.dumps({"tokenizer_hash": tokenizer_fingerprint(trained)}))
    with pytest.raises(ValueError, match="not the one it was trained with"):
        check_tokenizer(_lm(swapped, 3), {"pretrained": str(tmp_path)})
    assert check_tokenizer(_lm(trained, 3), {"pretrained": str(tmp_path)}) == tokenizer_fingerprint(trained)
    # a summary written before the hash was recorded: nothing to compare, the hash is still recorded
    (tmp_path / "train_summary.json").write_text(json.dumps({"seed": 0}))
    assert check_tokenizer(_lm(swapped, 3), {"pretrained": str(tmp_path)}) == tokenizer_fingerprint(swapped)


def test_the_provenance_records_the_tokenizer_beside_the_weights():
    from peeval.records import Provenance

    assert "tokenizer_hash" in {f for f in Provenance.__dataclass_fields__}
    assert Provenance.from_json({"model": "m", "tokenizer_hash": "ab"}).tokenizer_hash == "ab"
