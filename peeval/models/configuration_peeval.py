"""PeevalConfig: transformers' LlamaConfig plus the positional encoding.

Subclassing LlamaConfig keeps every Llama field name (``rope_theta``, ``rope_scaling`` /
``rope_parameters``, ``num_key_value_heads``, ...), so a Llama checkpoint's config maps
onto a ``pe="rope"`` peeval model one to one.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import LlamaConfig

ATTN_BACKENDS = ("sdpa", "eager", "flash", "triton", "flex", "blocked")


@strict
class PeevalConfig(LlamaConfig):
    model_type = "peeval"

    # small defaults (a CPU-sized model); every field can be overridden as in LlamaConfig
    vocab_size: int = 50304
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    max_position_embeddings: int = 512
    #: which positional encoding (a key of ``peeval.models.encodings.ENCODINGS``)
    pe: str = "rope"
    #: the encoding's own options, validated against its declared ``options``
    pe_options: dict | None = None
    #: attention back-end: sdpa (default), eager, flash, triton, flex, blocked (``attention.plan``)
    attn_backend: str = "sdpa"
    #: add a random offset k in [0, 2*max_position_embeddings] to positions while training
    random_offset: bool = False

    def __post_init__(self, **kwargs):
        if self.pe_options is None:
            self.pe_options = {}
        super().__post_init__(**kwargs)
        self.validate_pe()

    def validate_pe(self) -> None:
        """Fail at load time on an unknown encoding, option or back-end (SPEC 2.1)."""
        from .encodings import get_encoding_class
        from .encodings.base import resolve_options

        if self.attn_backend not in ATTN_BACKENDS:
            raise ValueError(f"attn_backend={self.attn_backend!r}: allowed {', '.join(ATTN_BACKENDS)}")
        if not isinstance(self.pe_options, dict):
            raise ValueError(f"pe_options must be a dict, got {type(self.pe_options).__name__}")
        resolve_options(get_encoding_class(self.pe), self.pe_options, self.pe)
