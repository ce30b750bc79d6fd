"""The tiny corpus and model sizes shared by the training tests; its fixtures (`corpus`, `tok_dir`) are
registered for every test by ``pytest_plugins`` in tests/conftest.py, so no test module imports another."""

import pytest
import torch

TEXT = (
    "The quick brown fox jumps over the lazy dog. The lazy dog sleeps under the old oak tree. "
    "A fox and a dog are friends in the green field near the river. "
) * 30

#: `run_train` settings of a 2-layer model that trains in a second on the CPU
TINY = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    seq_len=32,
    batch_size=4,
    eval_batches=2,
    train_chars=None,
    val_chars=None,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    for i in range(4):
        (d / f"{i:02d}.txt").write_text(TEXT)
    return str(d)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from peeval.training.data import train_bpe

    d = tmp_path_factory.mktemp("tok")
    train_bpe([TEXT], 200).save_pretrained(d)
    return str(d)


def save_tiny_llama(d, text: str, **config):
    """A random 2-layer GQA Llama (3 query heads, 1 KV head, seed 0) + a byte-level BPE trained on ``text``,
    saved as a HF folder ``d`` (the stand-in for SmolLM2 in the adaptation tests)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from peeval.training.data import train_bpe

    tok = train_bpe([text], 300)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=3,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        **config,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d
