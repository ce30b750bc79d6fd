"""PeevalForCausalLM: a Llama-style decoder whose positional encoding is pluggable.

Pre-norm RMSNorm, SwiGLU MLP (transformers' own Llama modules), no biases, optional tied
embeddings, GQA. Everything positional goes through ``self.model.pe`` (an
``encodings.Encoding``) via its hooks; the layers below contain no per-encoding code.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

from . import attention as attn
from .attention_ops import build_allowed, repeat_kv
from .configuration_peeval import PeevalConfig, attn_backend_for, transformers_label
from .encodings import Encoding, PEContext, build_encoding
from .linear_loss import next_token_loss

#: the name under which this transformers release hands the KV cache to ``forward`` and reads it back
#: from outputs: ``cache`` from 5.24 on (``past_key_values`` deprecated there), ``past_key_values``
#: before. The model accepts both names on every release, as 5.24's Llama does.
CACHE_KWARG = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def _one_cache(cache, past_key_values):
    """The cache passed under either name (both at once is an error, as in transformers)."""
    if cache is not None and past_key_values is not None:
        raise ValueError("pass the KV cache as `cache` or as `past_key_values`, not both")
    return past_key_values if cache is None else cache


class PeevalAttention(nn.Module):
    def __init__(self, config: PeevalConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        c, d = config.hidden_size, config.head_dim
        self.q_proj = nn.Linear(c, self.num_heads * d, bias=config.attention_bias)
        self.k_proj = nn.Linear(c, self.num_kv_heads * d, bias=config.attention_bias)
        self.v_proj = nn.Linear(c, self.num_kv_heads * d, bias=config.attention_bias)
        self.o_proj = nn.Linear(self.num_heads * d, c, bias=config.attention_bias)

    def forward(self, x, pe: Encoding, ctx: PEContext, attention_mask, cache, output_attentions=False):
        b, n, _ = x.shape
        d = self.head_dim
        q = self.q_proj(x).view(b, n, -1, d).transpose(1, 2)
        k = self.k_proj(x).view(b, n, -1, d).transpose(1, 2)
        v = self.v_proj(x).view(b, n, -1, d).transpose(1, 2)
        if pe.kv_per_query_head:  # the encoding transforms keys per query head: cache them so
            rep = self.num_heads // self.num_kv_heads
            k, v = repeat_kv(k, rep), repeat_kv(v, rep)

        call = attn.AttentionCall(
            pe, self.layer_idx, self.config.attn_backend, ctx, q, attention_mask, output_attentions
        )
        how = attn.plan(call)  # before the transform: a fused kernel may take raw q/k
        ctx.fused = how == "triton"  # an encoding whose kernel takes raw q/k skips its transform then
        ctx.attn_input = x  # the normalised layer input q/k/v come from (CoPE's separate gate keys)
        q, k = pe.transform_qk(self.layer_idx, q, k, ctx)
        if pe.recorded_states is not None:  # the shift measurement asks for the positional states
            state = pe.positional_state(self.layer_idx, q, ctx)
            if state is not None:
                pe.recorded_states.append(state.detach().float().clone())
        extra = pe.extra_values(self.layer_idx, ctx)
        if extra is not None:
            v = torch.cat([v, extra.to(v.dtype)], dim=-1)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        if v.dtype != q.dtype:  # an encoding lifted q/k (xpos in float16): attend in their dtype
            v = v.to(q.dtype)
        ctx.values = v
        call.q, call.k, call.v = q, k, v
        call.allowed = build_allowed(attention_mask, q.shape[2], k.shape[2], q.device)
        out, probs = attn.attend(how, call)
        if extra is not None:
            out, extra_out = out.split([d, out.shape[-1] - d], dim=-1)
            pe.after_attention(self.layer_idx, extra_out, ctx)
        out = out.transpose(1, 2).reshape(b, n, -1).to(x.dtype)
        return self.o_proj(out), probs


class PeevalDecoderLayer(nn.Module):
    def __init__(self, config: PeevalConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.self_attn = PeevalAttention(config, layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, x, pe, ctx, attention_mask, cache, output_attentions=False):
        a, probs = self.self_attn(self.input_layernorm(x), pe, ctx, attention_mask, cache, output_attentions)
        x = x + a
        m = self.mlp(self.post_attention_layernorm(x))
        pe.after_mlp(self.layer_idx, m, ctx, attn_out=a)
        return x + m, probs


class PeevalPreTrainedModel(PreTrainedModel):
    config_class = PeevalConfig
    config: PeevalConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False
    _no_split_modules = ["PeevalDecoderLayer"]
    _skip_keys_device_placement = [CACHE_KWARG]
    _supports_sdpa = True

    def _check_and_adjust_attn_implementation(self, attn_implementation, *args, **kwargs):
        """transformers' ``attn_implementation`` names select peeval's back-ends (``sdpa``, ``eager``,
        ``flash_attention_2`` -> flash, ``flex_attention`` -> flex, or peeval's own names): the choice is
        stored as ``config.attn_backend``, which ``attention.plan`` reads; transformers itself keeps
        ``eager`` or ``sdpa`` (peeval's attention never calls transformers' attention functions)."""
        # what an outer model's check returned (the config keeps it): the inner model must not map it again
        labelled = attn_implementation == self.config.__dict__.get("_peeval_attn_label")
        label = attn_implementation
        if not (attn_implementation is None or isinstance(attn_implementation, dict) or labelled):
            self.config.attn_backend = attn_backend_for(attn_implementation)
            label = transformers_label(self.config.attn_backend)
        label = super()._check_and_adjust_attn_implementation(label, *args, **kwargs)
        self.config.__dict__["_peeval_attn_label"] = label
        return label

    def _initialize_weights(self, module, is_custom_code: bool = False):
        # transformers skips custom-code modules with no tensors of their own; an encoding
        # may hold only sub-modules, and its init functions skip loaded tensors themselves
        if isinstance(module, Encoding) and not getattr(module, "_is_hf_initialized", False):
            self._init_weights(module)
            module._is_hf_initialized = True
            return
        super()._initialize_weights(module, is_custom_code)

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, Encoding):
            module.init_weights()


class PeevalModel(PeevalPreTrainedModel):
    def __init__(self, config: PeevalConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.pe = build_encoding(config)
        self.layers = nn.ModuleList(PeevalDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values: Cache | None = None,
        inputs_embeds=None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        cache = _one_cache(cache, past_key_values)
        use_cache = self.config.use_cache if use_cache is None else use_cache
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        b, n = inputs_embeds.shape[:2]
        past = cache.get_seq_length() if cache is not None else 0
        nk = past + n
        key_position_ids = None
        # what the shapes say of the positions (no host sync, PEContext): only for positions built here
        n_positions = max_distance = position_bound = None
        if position_ids is None:
            max_distance = position_bound = nk  # keys contiguous, or repeated for pads: every i − j < Nk
            if attention_mask is not None and attention_mask.shape[-1] == nk and _maybe_padded(attention_mask):
                # as HF's generate: pads are not positions (cumsum(mask) - 1; left pads clamped to 0)
                key_position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0).to(inputs_embeds.device)
                position_ids = key_position_ids[:, -n:]
            else:
                position_ids = torch.arange(past, past + n, device=inputs_embeds.device)[None].expand(b, n)
                n_positions = nk
        if self.training and self.config.random_offset:
            n_positions = position_bound = None
            hi = 2 * self.config.max_position_embeddings
            shift = torch.randint(0, hi + 1, (b, 1), device=position_ids.device)
            position_ids = position_ids + shift
            key_position_ids = None if key_position_ids is None else key_position_ids + shift
        if key_position_ids is None:
            offset = position_ids[:, -1:] - (nk - 1)
            key_position_ids = torch.arange(nk, device=position_ids.device)[None] + offset
        ctx = PEContext(position_ids=position_ids, key_position_ids=key_position_ids, past_length=past, cache=cache,
                        n_positions=n_positions, max_distance=max_distance, position_bound=position_bound)  # fmt: skip
        pe, ctx = self.pe.remap(ctx)  # the encoding whose hooks run, on the positions it sees (randpe)

        h = pe.embed(inputs_embeds, ctx)
        all_hidden, all_attn = [], []
        for layer in self.layers:
            if output_hidden_states:
                all_hidden.append(h)
            h, probs = layer(h, pe, ctx, attention_mask, cache, bool(output_attentions))
            if output_attentions:
                all_attn.append(probs)
        h = self.norm(h)
        if output_hidden_states:
            all_hidden.append(h)
        return BaseModelOutputWithPast(
            last_hidden_state=h,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(all_attn) if output_attentions else None,
            **{CACHE_KWARG: cache},
        )


class PeevalForCausalLM(PeevalPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: PeevalConfig):
        super().__init__(config)
        self.model = PeevalModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def generate(self, inputs=None, generation_config=None, **kwargs):
        """GenerationMixin.generate, telling the encoding the final length first."""
        prompt = kwargs.get("input_ids", inputs) if inputs is None else inputs
        if prompt is None:
            prompt = kwargs.get("inputs_embeds")
        gen = generation_config or self.generation_config
        n_new = kwargs.get("max_new_tokens", gen.max_new_tokens)
        total = prompt.shape[1] + n_new if n_new is not None else kwargs.get("max_length", gen.max_length)
        self.model.pe.set_generation_length(total)
        try:
            return super().generate(inputs, generation_config, **kwargs)
        finally:
            self.model.pe.set_generation_length(None)

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        inputs_embeds=None,
        labels=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        logits_to_keep: int = 0,
        cache=None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=_one_cache(cache, past_key_values),
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        h = out.last_hidden_state
        if logits_to_keep:
            h = h[:, -logits_to_keep:]
        if labels is not None and self.config.linear_loss != "logits":  # the loss without the logits (issue 65)
            loss = next_token_loss(h, self.lm_head.weight, labels, self.config.linear_loss,
                                   kwargs.get("num_items_in_batch"))  # fmt: skip
            logits = None
        else:
            logits = self.lm_head(h)
            loss = None
        if labels is not None and logits is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
            **{CACHE_KWARG: getattr(out, CACHE_KWARG)},
        )


def _maybe_padded(mask: torch.Tensor) -> bool:
    """Whether ``mask`` has a 0. Compiled, a given mask counts as padded without reading it (a host sync would
    split the graph, issue 57): for a mask of ones that is the same attention (causal & ones = causal) and the
    same positions (cumsum − 1 = arange)."""
    return torch.compiler.is_compiling() or not bool(mask.all())
