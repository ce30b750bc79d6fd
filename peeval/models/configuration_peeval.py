"""PeevalConfig: transformers' LlamaConfig plus the positional encoding.

Subclassing LlamaConfig keeps every Llama field name (``rope_theta``, ``rope_scaling`` /
``rope_parameters``, ``num_key_value_heads``, ...), so a Llama checkpoint's config maps
onto a ``pe="rope"`` peeval model one to one.

``config.json`` carries ``pe_options`` as given (the run's identity: labels and provenance
read it) and ``pe_options_effective``, every declared option with its default filled in, so
a reader knows what a checkpoint is without importing the encoding registry, and a later
change of a default cannot silently change what an old checkpoint loads as.
"""

from __future__ import annotations

import json

from huggingface_hub.dataclasses import strict
from transformers import LlamaConfig

from ..registry import ATTN_BACKENDS, LINEAR_LOSSES

#: transformers' ``attn_implementation`` names -> peeval's ``attn_backend`` (and peeval's own names as
#: themselves): ``from_pretrained(..., attn_implementation="flex_attention")`` sets ``attn_backend="flex"``
ATTN_IMPLEMENTATIONS = {
    "sdpa": "sdpa",
    "eager": "eager",
    "flash_attention_2": "flash",
    "flex_attention": "flex",
    **{b: b for b in ATTN_BACKENDS},
}


def transformers_label(attn_backend: str) -> str:
    """What transformers is told (``config._attn_implementation``): eager for the eager back-end, else sdpa."""
    return "eager" if attn_backend == "eager" else "sdpa"


def attn_backend_for(attn_implementation: str) -> str:
    """peeval's back-end for a transformers ``attn_implementation`` name (ValueError naming the allowed ones)."""
    if attn_implementation not in ATTN_IMPLEMENTATIONS:
        allowed = ", ".join(f"{k} ({v})" if k != v else k for k, v in ATTN_IMPLEMENTATIONS.items())
        raise ValueError(f"attn_implementation={attn_implementation!r} for a peeval model: allowed {allowed}")
    return ATTN_IMPLEMENTATIONS[attn_implementation]


EFFECTIVE = "pe_options_effective"  # the config.json key; derived, never stored on the object
#: callbacks run once, when the first PeevalConfig is built (a list, so this module imports nothing upward)
ON_FIRST_BUILD: list = []


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
    #: the encoding's own options as given, validated against its declared ``options``
    pe_options: dict | None = None
    #: attention back-end: sdpa (default), eager, flash, triton, flex, blocked (``attention.plan``)
    attn_backend: str = "sdpa"
    #: add a random offset k in [0, 2*max_position_embeddings] to positions while training
    random_offset: bool = False
    #: how the loss meets lm_head: logits (default: whole logits, then cross-entropy), chunked, liger
    #: (``linear_loss.LINEAR_LOSSES``: the latter two never hold the logits whole)
    linear_loss: str = "logits"

    def __post_init__(self, **kwargs):
        recorded = kwargs.pop(EFFECTIVE, None)
        if self.pe_options is None:
            self.pe_options = {}
        self.validate_shape()  # before LlamaConfig divides by the heads
        super().__post_init__(**kwargs)
        self.validate_pe()
        if recorded is not None:
            self._pin_recorded(recorded)
        while ON_FIRST_BUILD:  # a peeval model is near (peeval.models registers the Auto model classes)
            ON_FIRST_BUILD.pop(0)()

    #: the sizes a model is built from: a whole number >= 1 each (a config.json with ``vocab_size: -5`` or
    #: ``num_attention_heads: 0`` was a RuntimeError or ZeroDivisionError deep in the model's construction)
    SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "max_position_embeddings")  # fmt: skip

    def validate_shape(self) -> None:
        """ValueError (one line) unless every size is a whole number >= 1 and the heads divide the width."""
        for k in (*self.SIZES, "num_key_value_heads"):
            v = getattr(self, k, None)
            if k == "num_key_value_heads" and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"config {k}={v!r}: allowed a whole number >= 1")
        if getattr(self, "head_dim", None) is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config hidden_size={self.hidden_size} is not a multiple of num_attention_heads="
                             f"{self.num_attention_heads}")  # fmt: skip
        kv = getattr(self, "num_key_value_heads", None)
        if kv is not None and self.num_attention_heads % kv:
            raise ValueError(f"config num_attention_heads={self.num_attention_heads} is not a multiple of "
                             f"num_key_value_heads={kv}")  # fmt: skip

    def validate_pe(self) -> None:
        """Fail at load time on a bad size, an unknown encoding, option or back-end (SPEC 2.1)."""
        if self.attn_backend not in ATTN_BACKENDS:
            raise ValueError(f"attn_backend={self.attn_backend!r}: allowed {', '.join(ATTN_BACKENDS)}")
        if self.linear_loss not in LINEAR_LOSSES:
            raise ValueError(f"linear_loss={self.linear_loss!r}: allowed {', '.join(LINEAR_LOSSES)}")
        if not isinstance(self.pe_options, dict):
            raise ValueError(f"pe_options must be a dict, got {type(self.pe_options).__name__}")
        self._resolve_options()

    @property
    def effective_pe_options(self) -> dict:
        """Every declared option of ``pe``: the given value, else the encoding's default."""
        return self._resolve_options()

    def _resolve_options(self) -> dict:
        from .encodings import get_encoding_class
        from .encodings.base import resolve_options

        return resolve_options(get_encoding_class(self.pe), self.pe_options or {}, self.pe)

    def _pin_recorded(self, recorded) -> None:
        """Keep the options a checkpoint was saved with where today's defaults differ."""
        if not isinstance(recorded, dict):
            raise ValueError(f"{EFFECTIVE} must be a dict, got {type(recorded).__name__}")
        now = json.loads(json.dumps(self.effective_pe_options))  # compare as config.json stores them
        clash = sorted(k for k in self.pe_options if k in recorded and recorded[k] != now.get(k))
        if clash:
            raise ValueError(f"{EFFECTIVE} disagrees with pe_options on {clash}: remove {EFFECTIVE} or fix pe_options")
        changed = {k: v for k, v in recorded.items() if k not in now or now[k] != v}
        if changed:
            from .._log import log_once

            log_once(
                f"pe={self.pe!r}: saved with pe_options {changed} (today's defaults differ): keeping the saved ones"
            )
            self.pe_options = {**changed, **self.pe_options}
            self.validate_pe()  # an option unknown today fails here, naming it

    def to_dict(self) -> dict:
        out = super().to_dict()
        out.pop("_peeval_attn_label", None)  # the modeling's marker (PeevalPreTrainedModel), never saved
        out[EFFECTIVE] = self.effective_pe_options
        return out
