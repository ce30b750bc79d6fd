"""``peeval-hf``: any causal LM lm-eval's HFLM loads, through peeval's wrapper (issue 68 item 8).

``peeval eval --model hf`` runs it: lm-eval's own ``hf`` model places a model on cuda unless told otherwise (a
40-line "Torch not compiled with CUDA enabled" on a CPU machine) and cannot score the exact perplexity windows of
``peeval_ppl_*``; peeval's wrapper picks the device the machine has and cuts those windows itself, so a GPT-2,
Pythia or Qwen checkpoint scores every task of a board that needs no peeval internals.
"""

from __future__ import annotations

from peeval._io import check_safetensors

from .plugin import PeevalHFLMBase, local_folder


class PeevalHFLM(PeevalHFLMBase):
    """``--model peeval-hf`` (what ``peeval eval --model hf`` runs): any causal LM lm-eval's HFLM loads (GPT-2,
    Pythia, Qwen, ...), with peeval's device pick (cuda if available, else cpu) and its exact perplexity windows,
    so it scores every task of a board that needs no peeval internals."""

    model_name = "peeval-hf"

    def __init__(self, pretrained=None, **kw):
        self.check_args(pretrained, kw)
        check_safetensors(local_folder("pretrained", pretrained), "checkpoint's weights")
        super().__init__(pretrained, **kw)


__all__ = ["PeevalHFLM"]
