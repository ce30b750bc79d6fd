"""lm-eval model wrappers: ``peeval`` / ``peeval-<pe>`` (peeval checkpoints) and ``peeval-llama``.

They subclass lm-eval's ``HFLM`` (batching, generation through the KV cache, accelerate data
parallelism unchanged) and add: device = cuda if available else cpu; ``max_length`` may be
set beyond the training length (extrapolation is what is measured); a checkpoint whose
``pe`` differs from the model name is an error; and the exact-window perplexity protocol of
``peeval_ppl_*`` (``loglikelihood_rolling`` requests whose doc carries ``peeval_window``).
Registered by the import hook in ``peeval/evaluation/lm_eval_hook.py``, so no ``--include_path``.

Bad model_args fail before any weights are read, with one ``ValueError`` naming the argument
and what is allowed (an unknown name lists the known ones); a truncated or corrupt
``*.safetensors`` file is named, instead of the library's file-less header error.
"""

from __future__ import annotations

import inspect
import logging
import math
import os

import torch
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

import peeval.models  # noqa: F401  (registers model_type "peeval" with the Auto classes)
from peeval._io import check_safetensors
from peeval._log import muted
from peeval.data import patch_lm_eval_tasks

patch_lm_eval_tasks()  # lm-eval's own tasks load from the mirror (also done by the import hook)

logger = logging.getLogger("peeval")


def _device(device: str | None) -> str:
    if device and device.startswith("cuda") and not torch.cuda.is_available():
        logger.warning("peeval: CUDA is not available, evaluating on cpu")
        return "cpu"
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


#: ``from_pretrained`` keywords that HFLM forwards and that apply to peeval's models
_FROM_PRETRAINED = ("attn_implementation", "device_map")


def _named_params(fn) -> set[str]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in inspect.signature(fn).parameters.values() if p.kind in kinds} - {"self"}


def local_folder(name: str, value) -> str | None:
    """``value`` when it names a local path (absolute, ./ or ~/): it must exist."""
    if not isinstance(value, str) or not value:
        return None
    if value.startswith(("/", ".", "~")) or os.path.exists(value):
        path = os.path.expanduser(value)
        if not os.path.exists(path):
            raise ValueError(f"{name}={value!r}: no such file or folder")
        return path
    return None  # a hub id


#: a folder holding any of these carries a tokenizer transformers can load
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model", "sentencepiece.bpe.model")  # fmt: skip


def _check_tokenizer(model_name: str, pretrained, kwargs: dict) -> None:
    """A checkpoint folder without tokenizer files (and no ``tokenizer=`` or ``gguf_file=``) is one
    line naming it; transformers would answer "install sentencepiece or tiktoken"."""
    folder = local_folder("pretrained", pretrained)
    if not folder or not os.path.isdir(folder) or kwargs.get("tokenizer") or kwargs.get("gguf_file"):
        return
    if not any(os.path.exists(os.path.join(folder, f)) for f in TOKENIZER_FILES):
        raise ValueError(
            f"--model {model_name}: {pretrained} holds no tokenizer ({', '.join(TOKENIZER_FILES[:4])}, ...): "
            "save the tokenizer beside the weights, or pass model_args tokenizer=<folder>"
        )


def check_finite_weights(model, pretrained) -> None:
    """A checkpoint with NaN or infinite weights (a diverged training run) is refused: every score it
    gave would be NaN, not a measurement."""
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        name = pretrained if isinstance(pretrained, str) else getattr(model, "name_or_path", "") or "the model"
        raise ValueError(
            f"checkpoint {name}: {len(bad)} weight tensor(s) are NaN or infinite (e.g. {bad[0]}): its "
            "training diverged; retrain it (a lower lr) before evaluating"
        )


def check_trained_encoding(pretrained: str, cfg) -> None:
    """A checkpoint whose config.json names another encoding than the one it was trained with (its
    ``train_summary.json``) is refused: the weights would be evaluated under an encoding they never saw,
    and recorded as that encoding."""
    folder = local_folder("pretrained", pretrained)
    summary = os.path.join(folder, "train_summary.json") if folder and os.path.isdir(folder) else None
    if not summary or not os.path.isfile(summary):
        return
    import json

    try:
        with open(summary, encoding="utf-8") as f:
            trained = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{summary}: cannot read the training summary ({e})") from e
    if not isinstance(trained, dict) or "pe" not in trained:
        return
    now = (cfg.pe, dict(getattr(cfg, "pe_options", None) or {}))
    then = (trained["pe"], dict(trained.get("pe_options") or {}))
    if now != then:
        raise ValueError(
            f"checkpoint {pretrained}: config.json says pe={now[0]!r} {now[1]} but it was trained with "
            f"pe={then[0]!r} {then[1]} (train_summary.json): restore its config.json, or train that encoding"
        )


def _cpu_launch_world_size() -> int:
    """Processes started by a launcher (torchrun, accelerate launch) on a machine without CUDA."""
    if torch.cuda.is_available():
        return 1
    return int(os.environ.get("WORLD_SIZE", "1"))


#: ``dtype=`` values (lm-eval reads any other string as ``getattr(torch, dtype)``: a traceback)
DTYPES = ("auto", "float32", "bfloat16", "float16", "float64", "float", "half", "double")


class PeevalHFLMBase(HFLM):
    """What the peeval wrappers add to HFLM."""

    model_name = "peeval"

    @classmethod
    def allowed_args(cls) -> list[str]:
        """HFLM's own keywords, this wrapper's, and the forwarded ``from_pretrained`` ones."""
        names = _named_params(HFLM.__init__) | set(_FROM_PRETRAINED)
        for klass in cls.__mro__:
            if "__init__" in vars(klass) and issubclass(klass, PeevalHFLMBase):
                names |= _named_params(vars(klass)["__init__"])
        return sorted(names - {"backend", "kwargs"})

    @classmethod
    def check_args(cls, pretrained, kwargs: dict) -> None:
        """Unknown names, a missing ``pretrained`` and a bad ``max_length`` as one clear error."""
        unknown = sorted(set(kwargs) - set(cls.allowed_args()))
        if unknown:
            raise ValueError(
                f"--model {cls.model_name}: unknown model_args {', '.join(unknown)} "
                f"(allowed: {', '.join(cls.allowed_args())})"
            )
        if pretrained is None or pretrained == "":
            raise ValueError(f"--model {cls.model_name}: model_args needs pretrained=<checkpoint folder>")
        ml = kwargs.get("max_length")
        if ml is not None and (isinstance(ml, bool) or not isinstance(ml, int) or ml < 1):
            raise ValueError(f"--model {cls.model_name}: max_length={ml!r} must be a positive integer (tokens)")
        dt = kwargs.get("dtype")
        if dt is not None and not isinstance(dt, torch.dtype) and dt not in DTYPES:
            raise ValueError(f"--model {cls.model_name}: dtype={dt!r}: allowed {', '.join(DTYPES)}")
        _check_tokenizer(cls.model_name, pretrained, kwargs)

    def __init__(self, pretrained, device: str | None = None, **kwargs):
        cpu_ranks = _cpu_launch_world_size() > 1 and isinstance(pretrained, str)
        if cpu_ranks:  # torchrun / accelerate launch on CPUs: HFLM's Accelerator() joins them over gloo
            from accelerate import PartialState

            PartialState(cpu=True)
        # backend: every model peeval wraps is causal (HFLM guesses from transformers' auto-class lists, where
        # peeval's model_type is not, and warns on every run)
        super().__init__(pretrained=pretrained, device=_device(device), backend="causal", **kwargs)
        acc = getattr(self, "accelerator", None)
        if cpu_ranks and acc is not None and acc.num_processes > 1 and self._world_size == 1:
            # HFLM enables its data-parallel path (each rank scores a share of the requests,
            # rank 0 gathers) only when it counts > 1 GPU: the same path, for CPU processes
            self._rank, self._world_size = acc.process_index, acc.num_processes
        check_finite_weights(self.model, pretrained)

    def _create_model(self, *args, **kwargs):
        """HFLM's loading, refusing a checkpoint that lacks a tensor (or has a wrong-shaped or extra
        one) instead of evaluating a model with random weights (peeval.models.loading)."""
        from peeval.models.loading import CompleteLoader

        auto = self.AUTO_MODEL_CLASS
        self.AUTO_MODEL_CLASS = CompleteLoader(auto)
        try:
            return super()._create_model(*args, **kwargs)
        finally:
            self.AUTO_MODEL_CLASS = auto

    def generate_until(self, requests, disable_tqdm: bool = False):
        """HFLM's generation, after checking that no passkey prompt would be left-truncated (the
        needle cut off: accuracy 0 with only a warning)."""
        for r in requests:
            doc = r.doc if isinstance(getattr(r, "doc", None), dict) else {}
            if not {"prompt", "key", "length", "depth", "index"} <= doc.keys():  # peeval_passkey's rows
                continue  # SCROLLS and lm-eval's tasks truncate their documents on purpose
            gen = (r.args[1] or {}).get("max_gen_toks", self.max_gen_toks)
            n = len(self.tok_encode(r.args[0]))
            if n + gen > self.max_length:
                raise ValueError(
                    f"peeval_passkey: a length-{doc['length']} prompt is {n} tokens of this model, which with "
                    f"{gen} generated tokens exceeds max_length={self.max_length}: it would be left-truncated and "
                    f"its pass key cut off; set model_args max_length >= {n + gen}"
                )
        # a max_length above the training length is the reader's choice (extrapolation is what is measured), and
        # no prompt is truncated (above): transformers' "friendly reminder" that generation passed it says nothing
        with muted("transformers.generation.stopping_criteria", logging.ERROR, "friendly reminder"):
            return super().generate_until(requests, disable_tqdm)

    # -- perplexity by length (peeval_ppl_*; the protocols' token plans: peeval.perplexity) ----------------
    #: tokens per batch of windows (one length per batch) on an accelerator and on a CPU (there one window per
    #: forward: batching was 12-19 % slower on one thread, benchmarks/results/ppl_protocol.md), logit entries
    #: per batch and per loss chunk
    PPL_BATCH_TOKENS = 16384
    PPL_BATCH_TOKENS_CPU = 1
    PPL_BATCH_LOGITS = 1 << 26
    PPL_LOGITS_CHUNK = 1 << 24

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        ours = [i for i, r in enumerate(requests) if isinstance(r.doc, dict) and "peeval_window" in r.doc]
        if not ours:
            return super().loglikelihood_rolling(requests, disable_tqdm)
        others = [i for i in range(len(requests)) if i not in set(ours)]
        out: list = [None] * len(requests)
        if others:
            for i, v in zip(others, super().loglikelihood_rolling([requests[i] for i in others], disable_tqdm)):
                out[i] = v
        scored = self.score_rows([(requests[i].args[0], requests[i].doc) for i in ours], disable_tqdm)
        for i, v in zip(ours, scored):
            out[i] = v
        return out

    def _row_plan(self, n_tokens: int, doc: dict) -> tuple[list, tuple[int, int] | None]:
        """The windows of one (document, length) row and its target run (None: windows protocol)."""
        from peeval import perplexity as P

        L = int(doc["peeval_window"])
        if doc.get("peeval_protocol", "windows") == "targets":
            span = P.target_span(n_tokens, per_doc=int(doc["peeval_targets"]), skip=int(doc["peeval_skip"]),
                                 longest=int(doc["peeval_longest"]), seed=int(doc["peeval_seed"]),
                                 doc_id=int(doc["doc_id"]))  # fmt: skip
            return P.target_windows(span, L), span
        longest = int(doc.get("peeval_longest") or L)
        if n_tokens < longest:  # no window at the longest length: that length would average fewer documents
            i = int(doc.get("doc_id") or 0)
            fewer = f" or max_docs <= {i}" if i else ""
            raise ValueError(
                f"peeval_ppl document {i} is {n_tokens} tokens of this model, fewer than length {longest}: under "
                "the windows protocol every length must score the same documents; use lengths <= "
                f"{n_tokens}{fewer}"
            )
        stride = int(doc.get("peeval_stride") or L)
        return P.disjoint_windows(n_tokens, L, stride, int(doc.get("peeval_max_windows") or 0)), None

    @torch.no_grad()
    def score_rows(self, rows: list[tuple[str, dict]], disable_tqdm: bool = False) -> list[dict]:
        """Each row's sum of log p over its scored tokens, token / byte / window counts, its target run,
        and (rows of the longest length) the loss by position bucket. Windows of one length are batched
        across rows; only the scored positions go through the output layer (``logits_to_keep``), except in
        the longest windows when the loss by position is asked for."""
        from peeval.perplexity import NOT_APPLICABLE, bucket_starts, lengths_past_table

        na = lengths_past_table(self.model, {int(doc["peeval_window"]) for _, doc in rows})
        if na:  # "not applicable": no cell for these lengths (peeval_ppl's process_results), the others scored
            logger.warning("peeval_ppl: %s: not applicable, no cell", na[max(na)].replace(f"length {max(na)}",
                           "length " + ", ".join(map(str, sorted(na)))))  # fmt: skip
            keep = [k for k, (_, doc) in enumerate(rows) if int(doc["peeval_window"]) not in na]
            out = [{NOT_APPLICABLE: na.get(int(doc["peeval_window"]))} for _, doc in rows]
            for k, r in zip(keep, self.score_rows([rows[k] for k in keep], disable_tqdm) if keep else []):
                out[k] = r
            return out
        too_long = max((int(doc["peeval_window"]) for _, doc in rows), default=0)
        if too_long > self.max_length:  # scored anyway, the run would record a max_length it did not apply
            from peeval.perplexity import exceeds

            raise ValueError(exceeds(too_long, self.max_length))
        cache: dict[str, torch.Tensor] = {}  # each document's token ids, once (its rows share them)
        plans, work = [], []  # work: (length, full logits?, row, window)
        for r, (text, doc) in enumerate(rows):
            if text not in cache:
                cache[text] = torch.tensor(self.tok_encode(text, add_special_tokens=False), dtype=torch.long)
            windows, span = self._row_plan(len(cache[text]), doc)
            L, n_buckets = int(doc["peeval_window"]), int(doc.get("peeval_buckets") or 0)
            by_pos = n_buckets > 0 and int(doc.get("peeval_longest") or 0) == L
            starts = bucket_starts(L, n_buckets) if by_pos else []
            plans.append({"text": text, "span": span, "ll": 0.0, "tokens": 0, "bytes": 0, "windows": len(windows),
                          "pos": [[0.0, 0] for _ in starts], "starts": starts})  # fmt: skip
            work += [(L, by_pos, r, w) for w in windows]
        work.sort(key=lambda t: (-t[0], t[1]))  # longest first: a memory error shows at once
        bar = tqdm(total=len(work), desc="peeval ppl windows", disable=disable_tqdm or self.rank != 0)
        vocab = int(getattr(self.model.config, "vocab_size", 0) or 1)
        budget = self.PPL_BATCH_TOKENS_CPU if torch.device(self.device).type == "cpu" else self.PPL_BATCH_TOKENS
        i = 0
        while i < len(work):
            L, by_pos = work[i][0], work[i][1]
            rows_kept = L if by_pos else max(w.scored for *_, w in work[i : i + budget // L + 1]) + 1
            batch = max(1, min(budget // L, self.PPL_BATCH_LOGITS // (rows_kept * vocab)))
            group = [t for t in work[i : i + batch] if t[0] == L and t[1] == by_pos]
            i += len(group)
            self._score_batch(group, plans, cache)
            bar.update(len(group))
        bar.close()
        out = []
        for plan, (_, doc) in zip(plans, rows):
            if plan["span"] is not None:  # the targets are the same at every length: their bytes once
                targets = cache[plan["text"]][plan["span"][0] : plan["span"][1]].tolist()
                plan["bytes"] = len(self.tokenizer.decode(targets).encode("utf-8"))
            row = {"ll": plan["ll"], "tokens": plan["tokens"], "bytes": plan["bytes"], "windows": plan["windows"],
                   "protocol": doc.get("peeval_protocol", "windows"), "length": int(doc["peeval_window"]),
                   "document": int(doc.get("doc_id") or 0),
                   "span": list(plan["span"]) if plan["span"] else None}  # fmt: skip
            if plan["starts"]:
                row["nll_pos"] = plan["pos"]
            out.append(row)
        return out

    def _score_batch(self, group: list, plans: list, cache: dict) -> None:
        """One forward over windows of one length; adds each window's scored log-likelihoods to its row."""
        L, by_pos = group[0][0], group[0][1]
        x = torch.stack([cache[plans[r]["text"]][w.start : w.end] for _, _, r, w in group]).to(self.device)
        keep = L if by_pos else max(w.scored for *_, w in group) + 1
        logits = self._window_logits(x, keep)  # (B, keep, V): predictions of x[:, L-keep+1 :] (and one beyond)
        pred, target = logits[:, :-1], x[:, L - keep + 1 :]
        nll = self._nll(pred, target)  # (B, keep - 1)
        for b, (_, _, r, w) in enumerate(group):
            plan = plans[r]
            plan["ll"] -= nll[b, nll.shape[1] - w.scored :].sum().item()
            plan["tokens"] += w.scored
            if plan["span"] is None:  # windows protocol: the bytes of each window's scored tokens
                tail = x[b, L - w.scored :].tolist()
                plan["bytes"] += len(self.tokenizer.decode(tail).encode("utf-8"))
            if by_pos:  # target position p (p tokens of context) = column p - 1 of nll
                n = len(plan["starts"])
                pos = torch.arange(1, L, device=nll.device)
                bucket = pos * n // L
                sums = torch.zeros(n, dtype=torch.float64, device=nll.device).index_add_(0, bucket, nll[b].double())
                counts = torch.bincount(bucket, minlength=n)
                for k in range(n):
                    plan["pos"][k][0] += sums[k].item()
                    plan["pos"][k][1] += int(counts[k])

    def _window_logits(self, x: torch.Tensor, keep: int) -> torch.Tensor:
        """Logits of the last ``keep`` positions; a model without ``logits_to_keep`` computes them all."""
        try:
            return self.model(input_ids=x, logits_to_keep=keep).logits[:, -keep:]
        except TypeError:
            return self._model_call(x)[:, -keep:]

    def _nll(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """−log p(target) per position in float32, the log-softmax in chunks of rows (never a full
        float32 copy of a large-vocabulary logit tensor)."""
        B, T, V = logits.shape
        flat, tgt = logits.reshape(B * T, V), target.reshape(B * T)
        rows = max(1, self.PPL_LOGITS_CHUNK // V)
        parts = [torch.nn.functional.cross_entropy(flat[i : i + rows].float(), tgt[i : i + rows], reduction="none")
                 for i in range(0, B * T, rows)]  # fmt: skip
        return torch.cat(parts).view(B, T)


def check_attention_args(model_name: str, attn_backend, attn_implementation) -> str | None:
    """model_args ``attn_backend=`` (peeval's back-ends) and ``attn_implementation=`` (transformers' names,
    mapped: ``peeval.models.configuration_peeval.ATTN_IMPLEMENTATIONS``), checked before any weights are
    read: the back-end they name, or None (the checkpoint's own)."""
    from peeval.models.configuration_peeval import ATTN_BACKENDS, attn_backend_for

    if attn_backend is not None and attn_backend not in ATTN_BACKENDS:
        raise ValueError(f"--model {model_name}: attn_backend={attn_backend!r}: allowed {', '.join(ATTN_BACKENDS)}")
    if attn_implementation is None:
        return attn_backend
    try:
        mapped = attn_backend_for(attn_implementation)
    except ValueError as e:
        raise ValueError(f"--model {model_name}: {e}") from None
    if attn_backend is not None and attn_backend != mapped:
        raise ValueError(
            f"--model {model_name}: attn_backend={attn_backend!r} and attn_implementation={attn_implementation!r} "
            f"(= {mapped!r}) disagree: give one"
        )
    return mapped


class PeevalLM(PeevalHFLMBase):
    """``--model peeval``: any peeval checkpoint; the encoding is read from it."""

    expected_pe: str | None = None

    def __init__(self, pretrained=None, attn_backend: str | None = None, **kwargs):
        self.check_args(pretrained, kwargs)
        backend = check_attention_args(self.model_name, attn_backend, kwargs.get("attn_implementation"))
        if backend is not None:  # read by from_pretrained as a config field
            kwargs["attn_backend"] = backend
        if isinstance(pretrained, str):
            from transformers import AutoConfig

            check_safetensors(local_folder("pretrained", pretrained), "checkpoint's weights")
            try:
                cfg = AutoConfig.from_pretrained(pretrained)
            except (OSError, ValueError) as e:
                raise ValueError(f"cannot read the peeval checkpoint {pretrained!r}: {e}") from e
            if cfg.model_type != "peeval":
                raise ValueError(f"{pretrained!r} is a {cfg.model_type!r} checkpoint: use --model peeval-llama")
            check_trained_encoding(pretrained, cfg)
            if self.expected_pe and cfg.pe != self.expected_pe:
                raise ValueError(
                    f"--model peeval-{self.expected_pe} but {pretrained!r} has pe={cfg.pe!r}: "
                    f"use --model peeval-{cfg.pe} (or --model peeval)"
                )
        super().__init__(pretrained, **kwargs)


#: peeval-llama's ``rope_scaling=`` values -> the `peeval adapt` method with the same rope parameters
#: (ntk: static NTK-aware base theta * factor^(d/(d-2)); dynamic: transformers' dynamic NTK).
ROPE_SCALINGS = {"linear": "pi", "ntk": "theta", "dynamic": "dynamic", "yarn": "yarn"}


def scaling_factor(rope_scaling: str | None, factor, adapter=None) -> float | None:
    """peeval-llama's ``factor``: a finite number with ``rope_scaling`` (default 2), else absent.

    transformers accepts factor >= 1. At factor 1, linear, ntk and yarn are the identity (the
    unscaled model, checked in tests/tasks/test_eval_inputs.py), so they need factor > 1: the base model
    is never filed under an extension method's name. Dynamic NTK at factor 1 is not the identity
    (beyond the training length the base still grows with seq_len / max_position_embeddings), so it
    takes factor >= 1."""
    if not rope_scaling:
        if factor is not None:
            where = "an adapter= carries its own factor" if adapter else f"rope_scaling={'|'.join(ROPE_SCALINGS)}"
            raise ValueError(f"peeval-llama: factor={factor!r} has no effect without rope_scaling= ({where})")
        return None
    if factor is None:
        return 2.0
    low_ok = rope_scaling == "dynamic"  # factor 1 is a real method only for dynamic NTK
    ok = not isinstance(factor, bool) and isinstance(factor, (int, float)) and math.isfinite(factor)
    if not ok or factor < 1 or (factor == 1 and not low_ok):
        cmp, why = (">= 1", "") if low_ok else ("> 1", " (at 1 it is the unscaled model: leave out rope_scaling)")
        raise ValueError(f"peeval-llama: factor={factor!r} must be a number {cmp} for rope_scaling={rope_scaling}{why}")
    return float(factor)


class PeevalLlamaLM(PeevalHFLMBase):
    """``--model peeval-llama``: a HF Llama-family checkpoint or GGUF file (``gguf_file=``),
    with optional ``rope_scaling=linear|ntk|dynamic|yarn`` + ``factor`` and ``adapter=DIR``
    (a ``peeval adapt`` directory: tape, lora, theta, pi or yarn, see ``peeval.models.llama_adapters``)."""

    model_name = "peeval-llama"

    def __init__(
        self, pretrained=None, rope_scaling: str | None = None, factor: float | None = None, adapter=None, **kw
    ):
        self.check_args(pretrained, kw)
        if adapter and rope_scaling:  # an adapter carries its own rope parameters
            raise ValueError("peeval-llama: give either adapter= or rope_scaling=, not both")
        if rope_scaling and rope_scaling not in ROPE_SCALINGS:
            raise ValueError(f"peeval-llama: rope_scaling={rope_scaling!r} is not one of {', '.join(ROPE_SCALINGS)}")
        factor = scaling_factor(rope_scaling, factor, adapter)
        check_safetensors(local_folder("pretrained", pretrained), "checkpoint's weights")
        check_safetensors(local_folder("adapter", adapter), "adapter's weights")
        if rope_scaling:  # training-free scaling, set on the config before loading
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from peeval.models.llama_adapters import base_config, rope_params_for
            from peeval.models.loading import load_complete

            load = {"gguf_file": kw["gguf_file"]} if kw.get("gguf_file") else {}
            cfg = base_config(pretrained, kw.get("gguf_file"))
            # the same parameters `peeval adapt` uses for pi / theta (static NTK-aware base) / yarn
            cfg.rope_parameters = rope_params_for(cfg, ROPE_SCALINGS[rope_scaling], factor)
            if not kw.get("tokenizer"):
                kw["tokenizer"] = AutoTokenizer.from_pretrained(pretrained, **load)
            pretrained = load_complete(AutoModelForCausalLM, pretrained, config=cfg, dtype=torch.float32, **load)
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
            attrs = {"expected_pe": pe, "model_name": f"peeval-{pe}", "__module__": __name__}
            cls = type(name, (PeevalLM,), {**attrs, "__doc__": f"--model peeval-{pe}"})
            globals()[name] = cls
            return cls
    raise AttributeError(name)


__all__ = ["PeevalLM", "PeevalLlamaLM"]
