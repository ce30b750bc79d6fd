"""PeevalConfig / PeevalForCausalLM, registered with transformers' Auto classes."""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .configuration_peeval import PeevalConfig
from .modeling_peeval import PeevalForCausalLM, PeevalModel

AutoConfig.register("peeval", PeevalConfig, exist_ok=True)
AutoModel.register(PeevalConfig, PeevalModel, exist_ok=True)
AutoModelForCausalLM.register(PeevalConfig, PeevalForCausalLM, exist_ok=True)

__all__ = ["PeevalConfig", "PeevalForCausalLM", "PeevalModel"]
