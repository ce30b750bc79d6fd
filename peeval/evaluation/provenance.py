"""What one ``peeval eval`` run records about itself (``results["peeval"]``): code and library versions, the
checkpoint's sha256, the protocol, the run kind. Apart from the runner (:mod:`peeval.evaluation.runner`) because it
changes when the record does (``peeval.records.Provenance``), not when lm-eval's calling convention does; the shift
study
records the same fields."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from importlib import metadata as importlib_metadata
from pathlib import Path

from ..install.versions import cpu_identity


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
        return out.stdout.strip() or None
    except OSError:
        return None


def checkpoint_hash(path: str | None) -> str | None:
    """sha256 of the checkpoint's weight files (a directory), or of the file itself."""
    if not path or not os.path.exists(path):
        return None
    files = [Path(path)] if os.path.isfile(path) else sorted(Path(path).glob("*.safetensors"))
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest() if files else None


def _ppl_protocol(metadata: dict) -> str:
    """The perplexity protocol in words (``peeval.tasks.ppl.ppl.describe_protocol``)."""
    from peeval.tasks.ppl.ppl import describe_protocol

    try:
        return describe_protocol(metadata)
    except ValueError:  # no perplexity task read this metadata
        return describe_protocol({})


def library_versions(libs) -> dict[str, str | None]:
    """Installed version of each library (None when absent)."""
    versions = {}
    for lib in libs:
        try:
            versions[lib] = importlib_metadata.version(lib.replace("_", "-"))
        except importlib_metadata.PackageNotFoundError:
            versions[lib] = None
    return versions


def now_iso() -> str:
    """The provenance date: UTC, seconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def weights_path(model_args: dict) -> str | None:
    """What ``checkpoint_sha256`` hashes: the checkpoint folder's weights, or its GGUF file."""
    pretrained = str(model_args["pretrained"]) if model_args.get("pretrained") else None
    gguf = model_args.get("gguf_file")
    return os.path.join(pretrained, gguf) if gguf and pretrained else pretrained


def run_kind(model: str, model_args: dict) -> str | None:
    """``runs.kind`` of this evaluation, from what it loads: an adapter, or a checkpoint with an adapt_summary.json,
    is 'adapt'; a checkpoint with a train_summary.json 'diagnostic' (trained on a task) or 'pretrain'; the packaged
    base itself (peeval-llama on its GGUF, no rope scaling) 'adapt' too, the adapters' reference row; any other
    model 'external'. None when a summary cannot be read (ingest reads the summaries again and names the file)."""
    from peeval.records import base_model_label

    folder = Path(str(model_args.get("adapter") or model_args.get("pretrained") or "."))
    if model_args.get("adapter") or (folder / "adapt_summary.json").is_file():
        return "adapt"
    if (summary := folder / "train_summary.json").is_file():
        try:
            return "diagnostic" if json.loads(summary.read_text(encoding="utf-8")).get("task") else "pretrain"
        except (OSError, ValueError, AttributeError):
            return None
    shipped = base_model_label(model_args.get("gguf_file")) and not model_args.get("rope_scaling")
    return "adapt" if model == "peeval-llama" and shipped else "external"


def check_tokenizer(lm, model_args: dict) -> str | None:
    """The hash of the tokenizer ``lm`` scores with (``peeval.training.data.tokenizer_fingerprint``), after checking
    it before anything is scored: a peeval model's tokenizer must fit its vocabulary (a larger one was an
    IndexError deep in the embedding) and be the one its ``train_summary.json`` recorded (another tokenizer of the
    same size copied in scored other text under the same checkpoint_sha256). ValueError (one line) otherwise."""
    from peeval.training.data import tokenizer_fingerprint

    tok = getattr(lm, "tokenizer", None)
    if tok is None or not hasattr(tok, "get_vocab"):
        return None
    cfg = getattr(getattr(lm, "model", None), "config", None)
    where = f"--model_args pretrained={model_args.get('pretrained')}"
    vocab = getattr(cfg, "vocab_size", None)
    if getattr(cfg, "model_type", None) == "peeval" and isinstance(vocab, int) and len(tok) > vocab:
        raise ValueError(f"{where}: its tokenizer has {len(tok)} tokens, more than the model's vocab_size {vocab} "
                         "(a token id beyond the embedding): the checkpoint's own tokenizer is needed")  # fmt: skip
    got = tokenizer_fingerprint(tok)
    summary = Path(str(model_args.get("pretrained") or ".")) / "train_summary.json"
    try:
        recorded = json.loads(summary.read_text(encoding="utf-8")).get("tokenizer_hash") if summary.is_file() else None
    except (OSError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, str) and recorded != got:
        raise ValueError(f"{where}: its tokenizer (hash {got}) is not the one it was trained with ({summary}: "
                         f"tokenizer_hash {recorded}): put the training's tokenizer back")  # fmt: skip
    return got


def provenance(
    args, lm, model_args: dict, metadata: dict, data: dict | None = None, sha256=..., tokenizer_hash=None
) -> dict:
    """The ``results["peeval"]`` record (:class:`peeval.records.Provenance`) of one ``peeval eval``;
    ``data``: what each task read (``peeval.data.recording``); ``tokenizer_hash``: :func:`check_tokenizer`'s."""
    import torch

    import peeval
    from peeval.records import Provenance

    cfg = getattr(getattr(lm, "model", None), "config", None)
    versions = library_versions(("torch", "transformers", "lm_eval", "datasets", "peft", "accelerate"))
    pretrained = str(model_args["pretrained"]) if model_args.get("pretrained") else None
    if sha256 is ...:
        sha256 = checkpoint_hash(weights_path(model_args))
    return Provenance(
        peeval_version=peeval.__version__,
        git_commit=git_commit(),
        model=args.model,
        model_args=model_args,
        checkpoint=pretrained,
        checkpoint_sha256=sha256,
        pe=getattr(cfg, "pe", "rope" if cfg is not None and cfg.model_type == "llama" else None),
        pe_options=getattr(cfg, "pe_options", None),
        rope_parameters=getattr(cfg, "rope_parameters", None),
        training_length=getattr(cfg, "max_position_embeddings", None),
        max_length=getattr(lm, "max_length", None),
        protocol={"ppl": _ppl_protocol(metadata), "metadata": metadata},
        dtype=str(next(lm.model.parameters()).dtype) if hasattr(lm, "model") else None,
        seed=args.seed,
        limit=args.limit,
        device=str(getattr(lm, "device", args.device)),
        world_size=getattr(lm, "world_size", 1),  # processes that shared the requests (lm-eval data parallel)
        torch_threads=torch.get_num_threads(),  # per process
        versions={**versions, "python": sys.version.split()[0], "cuda": torch.version.cuda},
        command=sys.argv,
        date=now_iso(),
        data=data,
        cpu=cpu_identity(),
        run_kind=run_kind(args.model, model_args),
        tokenizer_hash=tokenizer_hash,
        model_params=model_size(lm),
        tokenizer=tokenizer_name(lm),
    ).to_json()


def model_size(lm) -> int | None:
    """The parameters of the model scored (every tensor, embeddings included, as train_summary.json counts)."""
    model = getattr(lm, "model", None)
    return sum(p.numel() for p in model.parameters()) if model is not None and hasattr(model, "parameters") else None


def tokenizer_name(lm) -> dict | None:
    """The tokenizer scored with: its name as loaded (a hub id, or the folder's name) and its vocabulary."""
    tok = getattr(lm, "tokenizer", None)
    if tok is None:
        return None
    name = str(getattr(tok, "name_or_path", "") or "").rstrip("/\\")
    return {"name": name.replace("\\", "/").rsplit("/", 1)[-1] or type(tok).__name__, "vocab_size": len(tok)}


def like_line(proto, lm, tokenizer_hash: str | None) -> str:
    """``--like``'s line on what differs from the board (``peeval.evaluation.like.comparability``), measured on
    the model loaded: its parameters, the window it was trained for, its tokenizer's size and hash."""
    from .like import comparability

    cfg = getattr(getattr(lm, "model", None), "config", None)
    trained = next((getattr(cfg, k) for k in ("max_position_embeddings", "n_positions", "n_ctx")
                    if isinstance(getattr(cfg, k, None), int)), None)  # fmt: skip
    tok = getattr(lm, "tokenizer", None)
    return comparability(proto, model_size(lm), trained, len(tok) if tok is not None else None, tokenizer_hash)
