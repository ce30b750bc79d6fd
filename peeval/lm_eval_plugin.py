"""lm-eval model wrappers: ``peeval`` / ``peeval-<pe>`` (peeval checkpoints) and ``peeval-llama``.

They subclass lm-eval's ``HFLM`` (batching, generation through the KV cache, accelerate data
parallelism unchanged) and add: device = cuda if available else cpu; ``max_length`` may be
set beyond the training length (extrapolation is what is measured); a checkpoint whose
``pe`` differs from the model name is an error; and the exact-window perplexity protocol of
``peeval_ppl_*`` (``loglikelihood_rolling`` requests whose doc carries ``peeval_window``).
Registered by the import hook in ``peeval/_lm_eval_hook.py``, so no ``--include_path``.
"""

from __future__ import annotations

import logging
import os

import torch
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

import peeval.models  # noqa: F401  (registers model_type "peeval" with the Auto classes)
from peeval.data import patch_lm_eval_tasks

patch_lm_eval_tasks()  # lm-eval's own tasks load from the mirror (also done by the import hook)

logger = logging.getLogger("peeval")


def _device(device: str | None) -> str:
    if device and device.startswith("cuda") and not torch.cuda.is_available():
        logger.warning("peeval: CUDA is not available, evaluating on cpu")
        return "cpu"
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _cpu_launch_world_size() -> int:
    """Processes started by a launcher (torchrun, accelerate launch) on a machine without CUDA."""
    if torch.cuda.is_available():
        return 1
    return int(os.environ.get("WORLD_SIZE", "1"))


class _PeevalHFLM(HFLM):
    """What the peeval wrappers add to HFLM."""

    def __init__(self, pretrained, device: str | None = None, **kwargs):
        cpu_ranks = _cpu_launch_world_size() > 1 and isinstance(pretrained, str)
        if cpu_ranks:  # torchrun / accelerate launch on CPUs: HFLM's Accelerator() joins them over gloo
            from accelerate import PartialState

            PartialState(cpu=True)
        super().__init__(pretrained=pretrained, device=_device(device), **kwargs)
        acc = getattr(self, "accelerator", None)
        if cpu_ranks and acc is not None and acc.num_processes > 1 and self._world_size == 1:
            # HFLM enables its data-parallel path (each rank scores a share of the requests,
            # rank 0 gathers) only when it counts > 1 GPU: the same path, for CPU processes
            self._rank, self._world_size = acc.process_index, acc.num_processes

    # -- exact-window perplexity (peeval_ppl_*) -------------------------------------
    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        ours = [i for i, r in enumerate(requests) if isinstance(r.doc, dict) and "peeval_window" in r.doc]
        if not ours:
            return super().loglikelihood_rolling(requests, disable_tqdm)
        others = [i for i in range(len(requests)) if i not in set(ours)]
        out: list = [None] * len(requests)
        if others:
            for i, v in zip(others, super().loglikelihood_rolling([requests[i] for i in others], disable_tqdm)):
                out[i] = v
        for i in tqdm(ours, desc="peeval windows", disable=disable_tqdm or self.rank != 0):
            out[i] = self.window_loglikelihood(requests[i].args[0], requests[i].doc)
        return out

    @torch.no_grad()
    def window_loglikelihood(self, text: str, doc: dict) -> dict:
        """Disjoint windows of exactly ``L`` tokens (or every ``stride``): sum log p of each
        scored token, token and byte counts. Each window is one forward of length L."""
        L, stride = int(doc["peeval_window"]), int(doc.get("peeval_stride") or doc["peeval_window"])
        ids = self.tok_encode(text, add_special_tokens=False)
        ll, n_tok, n_bytes, n_win = 0.0, 0, 0, 0
        starts = range(0, len(ids) - L + 1, stride)
        if doc.get("peeval_max_windows"):
            starts = starts[: int(doc["peeval_max_windows"])]
        for s in starts:
            window = torch.tensor(ids[s : s + L], device=self.device)[None]
            # sliding protocol: score only tokens not scored by the previous window
            first = 1 if s == 0 or stride >= L else L - stride
            logits = self._model_call(window).float()
            logp = torch.log_softmax(logits[0, first - 1 : L - 1], dim=-1)
            target = window[0, first:L]
            ll += logp.gather(-1, target[:, None]).sum().item()
            n_tok += L - first
            n_bytes += len(self.tokenizer.decode(target.tolist()).encode("utf-8"))
            n_win += 1
        return {"ll": ll, "tokens": n_tok, "bytes": n_bytes, "windows": n_win}


class PeevalLM(_PeevalHFLM):
    """``--model peeval``: any peeval checkpoint; the encoding is read from it."""

    expected_pe: str | None = None

    def __init__(self, pretrained, **kwargs):
        if isinstance(pretrained, str):
            from transformers import AutoConfig

            try:
                cfg = AutoConfig.from_pretrained(pretrained)
            except (OSError, ValueError) as e:
                raise ValueError(f"cannot read the peeval checkpoint {pretrained!r}: {e}") from e
            if cfg.model_type != "peeval":
                raise ValueError(f"{pretrained!r} is a {cfg.model_type!r} checkpoint: use --model peeval-llama")
            if self.expected_pe and cfg.pe != self.expected_pe:
                raise ValueError(
                    f"--model peeval-{self.expected_pe} but {pretrained!r} has pe={cfg.pe!r}: "
                    f"use --model peeval-{cfg.pe} (or --model peeval)"
                )
        super().__init__(pretrained, **kwargs)


#: peeval-llama's ``rope_scaling=`` values -> the `peeval adapt` method with the same rope parameters
#: (ntk: static NTK-aware base theta * factor^(d/(d-2)); dynamic: transformers' dynamic NTK).
ROPE_SCALINGS = {"linear": "pi", "ntk": "theta", "dynamic": "dynamic", "yarn": "yarn"}


class PeevalLlamaLM(_PeevalHFLM):
    """``--model peeval-llama``: a HF Llama-family checkpoint or GGUF file (``gguf_file=``),
    with optional ``rope_scaling=linear|ntk|dynamic|yarn`` + ``factor`` and ``adapter=DIR``
    (a ``peeval adapt`` directory: tape, lora, theta, pi or yarn, see ``peeval.models.llama_adapters``)."""

    def __init__(self, pretrained, rope_scaling: str | None = None, factor: float | None = None, adapter=None, **kw):
        if adapter and rope_scaling:  # an adapter carries its own rope parameters
            raise ValueError("peeval-llama: give either adapter= or rope_scaling=, not both")
        if rope_scaling:  # training-free scaling, set on the config before loading
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from peeval.models.llama_adapters import base_config, rope_params_for

            if rope_scaling not in ROPE_SCALINGS:
                raise ValueError(
                    f"peeval-llama: rope_scaling={rope_scaling!r} is not one of {', '.join(ROPE_SCALINGS)}"
                )
            load = {"gguf_file": kw["gguf_file"]} if kw.get("gguf_file") else {}
            cfg = base_config(pretrained, kw.get("gguf_file"))
            # the same parameters `peeval adapt` uses for pi / theta (static NTK-aware base) / yarn
            cfg.rope_parameters = rope_params_for(cfg, ROPE_SCALINGS[rope_scaling], float(factor or 2.0))
            if not kw.get("tokenizer"):
                kw["tokenizer"] = AutoTokenizer.from_pretrained(pretrained, **load)
            pretrained = AutoModelForCausalLM.from_pretrained(pretrained, config=cfg, dtype=torch.float32, **load)
        if adapter:  # a `peeval adapt` folder (tape / lora / theta / pi / yarn): it sets its own rope scaling
            from transformers import AutoTokenizer

            from peeval.models.llama_adapters import load_adapted

            if not kw.get("tokenizer"):
                load = {"gguf_file": kw["gguf_file"]} if kw.get("gguf_file") else {}
                kw["tokenizer"] = AutoTokenizer.from_pretrained(pretrained, **load)
            pretrained = load_adapted(pretrained, adapter, gguf_file=kw.get("gguf_file"))
        super().__init__(pretrained, **kw)


def __getattr__(name: str):
    """``PeevalLM_<pe>``: the ``peeval-<pe>`` model class (made on first use)."""
    if name.startswith("PeevalLM_"):
        from peeval.models.encodings import ENCODINGS

        pe = name[len("PeevalLM_") :]
        if pe in ENCODINGS:
            cls = type(
                name, (PeevalLM,), {"expected_pe": pe, "__module__": __name__, "__doc__": f"--model peeval-{pe}"}
            )
            globals()[name] = cls
            return cls
    raise AttributeError(name)


__all__ = ["PeevalLM", "PeevalLlamaLM"]
