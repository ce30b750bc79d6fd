"""A tiny peeval checkpoint with a byte-level BPE tokenizer trained on the spot (no download), for the
tests that run lm-eval end to end."""

from pathlib import Path

import torch


def save_tiny_checkpoint(
    out: Path, corpus: list[str], *, pe: str, vocab_size: int, max_positions: int, byte_decoder: bool = False
) -> Path:
    """Train the tokenizer on ``corpus`` × 20, save a 2-layer model (seed 0) and the tokenizer in ``out``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from peeval.models import PeevalConfig, PeevalForCausalLM

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if byte_decoder:
        tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus * 20, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")
    torch.manual_seed(0)
    cfg = PeevalConfig(vocab_size=len(hf_tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, max_position_embeddings=max_positions, pe=pe,
                       bos_token_id=hf_tok.bos_token_id, eos_token_id=hf_tok.eos_token_id)  # fmt: skip
    PeevalForCausalLM(cfg).save_pretrained(out)
    hf_tok.save_pretrained(out)
    return out
