"""The packed-corpus cache (peeval.training.data.pack_cached): the same blocks as packing, read back only for the
same texts, tokenizer and length, and never a reason for a run to fail."""

import pytest
import torch
from helpers.training import TEXT

from peeval.training import data as D


@pytest.fixture
def tok(tok_dir):
    return D.load_tokenizer(tok_dir)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(D.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "packed"


def test_the_cache_returns_what_packing_returns_and_reads_it_back(tok, cache, monkeypatch):
    texts = [TEXT, TEXT[:500]]
    fresh = D.pack(texts, tok, 32)
    first = D.pack_cached(texts, tok, 32)
    assert torch.equal(first, fresh) and first.dtype == torch.long
    assert len(list(cache.glob("*.pt"))) == 1

    def no_tokenising(*a, **k):
        raise AssertionError("tokenised again")

    monkeypatch.setattr(D, "pack", no_tokenising)
    again = D.pack_cached(texts, tok, 32)
    assert torch.equal(again, fresh) and again.dtype == torch.long


def test_another_text_tokenizer_or_length_never_reads_a_stale_file(tok, cache, tok_dir, tmp_path):
    texts = [TEXT]
    D.pack_cached(texts, tok, 32)
    changed = [TEXT[:100] + "X" + TEXT[101:]]  # one character
    assert torch.equal(D.pack_cached(changed, tok, 32), D.pack(changed, tok, 32))
    assert torch.equal(D.pack_cached(texts, tok, 16), D.pack(texts, tok, 16))
    split = [TEXT[:300], TEXT[300:]]  # the same characters as other documents: an EOS between them
    assert torch.equal(D.pack_cached(split, tok, 32), D.pack(split, tok, 32))
    other_dir = tmp_path / "tok2"
    D.train_bpe([TEXT], 300).save_pretrained(other_dir)  # 43 merges on top of the 257 byte tokens
    other = D.load_tokenizer(other_dir)
    assert D.tokenizer_fingerprint(other) != D.tokenizer_fingerprint(tok)
    assert torch.equal(D.pack_cached(texts, other, 32), D.pack(texts, other, 32))
    assert len(list(cache.glob("*.pt"))) == 5


def test_an_unreadable_file_is_packed_again_and_off_writes_nothing(tok, cache, monkeypatch, capsys):
    texts = [TEXT]
    D.pack_cached(texts, tok, 32)
    (path,) = cache.glob("*.pt")
    path.write_bytes(b"not a tensor")
    assert torch.equal(D.pack_cached(texts, tok, 32), D.pack(texts, tok, 32))
    assert "unreadable" in capsys.readouterr().out
    assert torch.equal(torch.load(path, weights_only=True).long(), D.pack(texts, tok, 32))  # replaced
    monkeypatch.setenv(D.CACHE_ENV, "off")
    path.unlink()
    assert torch.equal(D.pack_cached(texts, tok, 32), D.pack(texts, tok, 32))
    assert not list(cache.glob("*.pt"))


def test_a_cache_that_cannot_be_written_costs_the_time_not_the_run(tok, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # no folder can be made below a file, whoever runs the test
    monkeypatch.setenv(D.CACHE_ENV, str(blocker))
    assert torch.equal(D.pack_cached([TEXT], tok, 32), D.pack([TEXT], tok, 32))
    assert "cannot cache" in capsys.readouterr().out
