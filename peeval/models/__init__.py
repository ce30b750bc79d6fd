"""PeevalConfig / PeevalForCausalLM, registered with transformers' Auto classes.

Registration stays lazy in two steps. Importing this package registers the config class with
``AutoConfig`` (the ``.pth`` hook, ``peeval/evaluation/lm_eval_hook.py``, imports it on the first
lookup of ``model_type: peeval`` in a process that never imported peeval). The model classes
pull in transformers' modelling code, so they register when the first ``PeevalConfig`` is
built (``from_pretrained`` and ``from_config`` both build one before they look up the model
class) or when they are first read from this package.

The package owns the model: configuration and modelling code, the attention back-ends (``attention``,
``attention_ops``), one module per encoding (``encodings/``), checkpoint loading and the Llama adapters. Row 2 of
the layer table (docs/design.md): ``kernels``, ``install``, ``_io``, ``_log``, ``registry``; never data, tasks,
training or anything above.
"""

from __future__ import annotations

from .configuration_peeval import ON_FIRST_BUILD, PeevalConfig

_models_registered = False


def register_config(auto_config=None) -> None:
    if auto_config is None:
        from transformers import AutoConfig as auto_config

    auto_config.register("peeval", PeevalConfig, exist_ok=True)


def register_models() -> None:
    global _models_registered
    if _models_registered:
        return
    from transformers import AutoModel, AutoModelForCausalLM

    from .modeling_peeval import PeevalForCausalLM, PeevalModel

    AutoModel.register(PeevalConfig, PeevalModel, exist_ok=True)
    AutoModelForCausalLM.register(PeevalConfig, PeevalForCausalLM, exist_ok=True)
    _models_registered = True


register_config()
ON_FIRST_BUILD.append(register_models)


def __getattr__(name: str):
    if name in ("PeevalForCausalLM", "PeevalModel"):
        register_models()
        from . import modeling_peeval

        return getattr(modeling_peeval, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PeevalConfig", "PeevalForCausalLM", "PeevalModel", "register_config", "register_models"]
