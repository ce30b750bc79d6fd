"""peeval_ppl_<corpus>: perplexity by context length on long documents.

Each document is scored once per length L (``--metadata '{"lengths": [512, 2048]}'``, default
512…16384) under one of two protocols (``protocol``; the token plans live in ``peeval.perplexity``):

- ``targets`` (default): the same target tokens at every length, only the context grows. Each
  document gets a seeded run of target tokens past its front matter (``targets`` in all, split evenly
  over the documents; at least ``skip`` tokens in; ``seed``); at length L blocks of at most L // 2 of
  them are scored, each by one forward over the L tokens that end at the block's end.
- ``windows``: disjoint windows of exactly L tokens from each document's start (``max_windows``),
  or the sliding protocol with ``stride`` < L. The text scored differs between lengths.

Reported per length: token perplexity ``ppl@L`` (``inf`` when the model explodes), bits per byte
``bpb@L`` (comparable across tokenizers), the counts ``tokens@L`` and ``windows@L``; and the loss by
position inside the longest windows, ``nll_pos@P`` (mean NLL in nats of the targets with P.. tokens of
context, ``position_buckets`` equal buckets; 0 turns it off). Each (document, length) row's sums are
in the samples (log-likelihood, tokens, bytes, the target run), so two encodings or two lengths can be
compared document by document. Windows are cut by the peeval model wrappers, which know the tokenizer
(``loglikelihood_rolling`` requests carry ``peeval_window``); other lm-eval models are refused with a
clear error. ``max_docs`` (>= 1, or null for all) bounds the cost on a CPU. Bad metadata is one
``ValueError`` naming the key, raised when the task is built (so ``lm_eval`` and ``peeval eval``
agree); a metric is never NaN.

The corpora: the mirror's stand-in first (``peeval.data``), else a public copy that ``datasets`` 5 reads
(``HUB_COPIES``; ``deepmind/pg19`` and ``hoskinson-center/proof-pile`` are loading scripts it refuses),
pinned to a commit and recorded with it. ``hub_copy`` names another copy or commit, and reads the hub
even where a mirror is there (the stand-in is another corpus): ``peeval.tasks.metadata_keys.chosen_copy``.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated

import datasets
from lm_eval.api.task import ConfigurableTask
from pydantic import BeforeValidator

from peeval.data import HUB_COPIES
from peeval.perplexity import NOT_APPLICABLE, PROTOCOLS, bucket_starts, exceeds
from peeval.records import higher_is_better, position_metric, ppl_metric
from peeval.settings import Allowed, Invalid, Lenient, choice, integer, nonempty, one_or_list, validated
from peeval.tasks.metadata_keys import LM_EVAL_KEYS, check_keys, chosen_copy

DEFAULT_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
_NO_LIMIT = "an integer >= 1 or null for no limit"
#: corpus -> the hub dataset it is (the mirror's key: ``peeval.data.LOCAL``)
CORPORA = {"pg19": "deepmind/pg19", "proof_pile": "hoskinson-center/proof-pile"}
#: the keys only one protocol reads (given with the other: an error, not ignored)
PROTOCOL_KEYS = {"targets": ("targets", "skip", "targets_seed"), "windows": ("stride", "max_windows")}


class Windows(Lenient):
    """What peeval_ppl reads from its metadata (the other keys: ``check_keys``)."""

    protocol: choice(*PROTOCOLS) = "targets"
    lengths: Annotated[
        list[Annotated[integer(2), Allowed("an integer >= 2 (a window of L tokens scores L-1)")]],
        BeforeValidator(one_or_list),
        nonempty("a non-empty list of integers >= 2"),
        Allowed("a non-empty list of integers >= 2"),
    ] = list(DEFAULT_LENGTHS)
    targets: Annotated[integer(1), Allowed("an integer >= 1 (target tokens per corpus)")] = 16384
    skip: Annotated[integer(0), Allowed("an integer >= 0 (tokens of front matter skipped)")] = 4096
    targets_seed: integer(0) = 0
    position_buckets: Annotated[integer(0), Allowed("an integer >= 0 (0: no loss by position)")] = 32
    stride: Annotated[integer(1, null=True), Allowed("an integer >= 1 (omit it for disjoint windows)")] = None
    max_windows: Annotated[integer(1, null=True), Allowed(_NO_LIMIT)] = None
    max_docs: Annotated[integer(1, null=True), Allowed(_NO_LIMIT)] = None


def check_metadata(metadata: dict) -> dict:
    """The validated settings: ``protocol``, ``lengths`` (sorted ints >= 2: a window of L tokens scores
    L-1 of them), the targets protocol's ``targets`` / ``skip`` / ``targets_seed``, the windows protocol's
    ``stride`` (None, or 1 <= stride <= min(lengths)) and ``max_windows``, ``position_buckets`` and
    ``max_docs`` (None for no limit, else >= 1). Raised here, where the task reads its metadata, so
    plain ``lm_eval`` and ``peeval eval`` fail the same way, before any model work."""
    check_keys("peeval_ppl", metadata)
    try:
        w = validated(Windows, metadata)
    except Invalid as e:
        p = e.problem
        shown, text = (p.item, p.item_text) if p.item is not ... else (p.value, p.text)
        raise ValueError(f"peeval_ppl metadata {p.key}={shown!r}: must be {text}") from None
    lengths = sorted(set(w.lengths))
    for other, keys in PROTOCOL_KEYS.items():
        given = [k for k in keys if metadata.get(k) is not None]
        if other != w.protocol and given:
            raise ValueError(
                f"peeval_ppl metadata {given[0]}={metadata[given[0]]!r}: only the {other} protocol reads it "
                f"(protocol is {w.protocol!r}; set protocol: {other}, or leave {given[0]} out)"
            )
    if w.stride is not None and w.stride > lengths[0]:
        raise ValueError(
            f"peeval_ppl metadata stride={w.stride} is larger than length {lengths[0]}: sliding windows need "
            "1 <= stride <= every length (omit stride for disjoint windows)"
        )
    return {"protocol": w.protocol, "lengths": lengths, "targets": w.targets, "skip": w.skip,
            "targets_seed": w.targets_seed, "position_buckets": w.position_buckets, "stride": w.stride,
            "max_windows": w.max_windows, "max_docs": w.max_docs}  # fmt: skip


#: the config keys HFLM reads, in its order, for the ``max_length`` of a model given none
_SEQLEN_KEYS = ("n_positions", "max_position_embeddings", "n_ctx")


def default_max_length(model_args: dict) -> int | None:
    """The ``max_length`` a peeval model wrapper will take: model_args' own, else (as HFLM) the first of
    ``_SEQLEN_KEYS`` in a local checkpoint's config.json; None when it cannot be known before loading (a hub id)."""
    ml = model_args.get("max_length")
    if ml is not None:
        return ml if isinstance(ml, int) and not isinstance(ml, bool) else None  # a bad one: the wrapper's own error
    pretrained = model_args.get("pretrained")
    if not isinstance(pretrained, str) or not pretrained:
        return None
    import json
    import os

    config = os.path.join(os.path.expanduser(pretrained), "config.json")
    try:
        with open(config, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        return None  # no such folder / a hub id: the wrapper names it when it loads
    return next((cfg[k] for k in _SEQLEN_KEYS if isinstance(cfg.get(k), int)), None)


def check_fits(model: str, model_args: dict, tasks: list, metadata: dict) -> None:
    """Before any weights are read: a peeval model (``peeval``, ``peeval-<pe>``, ``peeval-llama``) asked for a
    ``peeval_ppl`` length beyond its ``max_length`` is one ``ValueError`` (bad metadata too), not a traceback
    after the model and the corpus were loaded. Called by ``peeval eval`` and, through the import hook, before
    plain ``lm_eval`` loads the model (``peeval.evaluation.lm_eval_hook``)."""
    if not (isinstance(model, str) and model.startswith("peeval")):
        return
    if not any(isinstance(t, str) and t.startswith("peeval_ppl") for t in tasks or ()):
        return
    lengths = check_metadata({k: v for k, v in (metadata or {}).items() if k not in LM_EVAL_KEYS})["lengths"]
    max_length = default_max_length(model_args or {})
    if max_length is not None and max(lengths) > max_length:
        raise ValueError(exceeds(max(lengths), max_length))


def describe_protocol(metadata: dict) -> str:
    """The protocol in words, as runs record it (``runs.protocol``)."""
    md = check_metadata(metadata)
    if md["protocol"] == "targets":
        words = f"fixed targets: {md['targets']} tokens, skip {md['skip']}, seed {md['targets_seed']}"
    else:
        stride = md["stride"]
        words = f"sliding, stride {stride}" if stride and stride < md["lengths"][-1] else "disjoint windows"
    # what else changes the scored tokens (other documents, fewer windows); absent when unset, as runs recorded it
    return words + "".join(f", {k} {md[k]}" for k in ("max_docs", "max_windows") if md[k] is not None)


def _lengths(metadata: dict) -> list[int]:
    return check_metadata(metadata)["lengths"]


def build_dataset(hub_id: str, split: str = "test", **metadata) -> datasets.DatasetDict:
    """Rows (document, length): document-major, so ``--limit`` keeps every length. A document that
    cannot give what the protocol needs (fewer bytes, hence fewer tokens, than the longest window, or
    than the skip, the longest window and its targets) is an error naming it, not a NaN row."""
    from peeval.data import load_dataset, record_documents

    md = check_metadata(metadata)
    corpus = next((c for c, h in CORPORA.items() if h == hub_id), None)
    chosen = chosen_copy(f"peeval_ppl_{corpus}", corpus, metadata) if corpus else None
    default = next(iter(HUB_COPIES[corpus].values())) if corpus else None
    docs = load_dataset(hub_id, split=split, copy=chosen or default, mirror=chosen is None)
    if "text" not in docs.column_names:
        raise ValueError(f"peeval_ppl ({hub_id}): the {split} split read has no 'text' column ({docs.column_names})")
    if md["max_docs"]:
        docs = docs.select(range(min(md["max_docs"], len(docs))))
    record_documents(docs["text"])  # the run's provenance: the documents scored, not the whole split
    longest = md["lengths"][-1]
    per_doc = -(-md["targets"] // max(1, len(docs)))  # the targets, split evenly over the documents
    need = max(md["skip"], longest - 1) + per_doc if md["protocol"] == "targets" else longest
    for i, text in enumerate(docs["text"]):
        n_bytes = len(text.encode("utf-8"))
        if n_bytes < need:
            fewer = f" or max_docs <= {i}" if i else ""
            if md["protocol"] == "windows":
                raise ValueError(
                    f"peeval_ppl ({hub_id}) metadata lengths: length {longest} is more than document {i} can give "
                    f"({n_bytes} bytes, so fewer tokens): use lengths <= {n_bytes}{fewer}"
                )
            raise ValueError(
                f"peeval_ppl ({hub_id}) metadata targets: document {i} has {n_bytes} bytes, so fewer than the {need} "
                f"tokens the targets protocol needs ({per_doc} targets after max(skip={md['skip']}, longest length "
                f"{longest} - 1) tokens): use fewer targets, a smaller skip, shorter lengths{fewer}"
            )
    plan = {"peeval_protocol": md["protocol"], "peeval_longest": longest, "peeval_buckets": md["position_buckets"]}
    if md["protocol"] == "targets":
        plan |= {"peeval_targets": per_doc, "peeval_skip": md["skip"], "peeval_seed": md["targets_seed"]}
    else:
        plan |= {"peeval_max_windows": md["max_windows"] or 0}
    rows = []
    for i, text in enumerate(docs["text"]):
        for L in md["lengths"]:
            stride = (md["stride"] or L) if md["protocol"] == "windows" else None
            rows.append({"doc_id": i, "text": text, "peeval_window": L, "peeval_stride": stride, **plan})
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})


def pg19(**metadata):
    return build_dataset(CORPORA["pg19"], **metadata)


def proof_pile(**metadata):
    return build_dataset(CORPORA["proof_pile"], **metadata)


def _ppl(items, where: str = "ppl") -> float:
    ll, n = sum(i[0] for i in items), sum(i[1] for i in items)
    if n == 0:  # never a NaN row: no document gave a full window
        raise ValueError(
            f"{where}: no token was scored (no evaluated document has that many tokens): use shorter lengths"
        )
    if math.isnan(ll):
        raise ValueError(f"{where}: the model's log-likelihood is NaN (non-finite weights or activations)")
    try:
        return math.exp(-ll / n)
    except OverflowError:  # an exploding model: report it, don't crash
        return float("inf")


def _bpb(items, where: str = "bpb") -> float:
    ll, b = sum(i[0] for i in items), sum(i[1] for i in items)
    if b == 0:
        raise ValueError(
            f"{where}: no token was scored (no evaluated document has that many tokens): use shorter lengths"
        )
    if math.isnan(ll):
        raise ValueError(f"{where}: the model's log-likelihood is NaN (non-finite weights or activations)")
    return -ll / (b * math.log(2))


def _mean_nll(items) -> float:
    """Mean NLL (nats per token) of a position bucket (every bucket holds >= 2 positions: never empty)."""
    nll, n = sum(i[0] for i in items), sum(i[1] for i in items)
    if n == 0:
        raise ValueError("nll_pos: no token in a position bucket (fewer position_buckets)")
    return nll / n


NOT_A_PEEVAL_MODEL = (
    "{task} cuts exact token windows with the model's tokenizer: run it with a peeval model "
    "(--model peeval, peeval-<pe>, peeval-llama or peeval-hf; peeval eval --model hf runs peeval-hf), "
    "not a generic lm-eval model"
)


def refuse_generic_models() -> None:
    """lm-eval's own ``hf`` model would score every whole document of a ppl task (hours on PG-19)
    and only then fail in ``process_results``: its ``loglikelihood_rolling`` refuses peeval's window
    requests at once. peeval's wrappers cut those windows themselves and never pass them on."""
    try:
        from lm_eval.models.huggingface import HFLM
    except ImportError:  # no torch / transformers: no hf model either
        return
    original = HFLM.loglikelihood_rolling
    if getattr(original, "_peeval_refuses_windows", False):
        return

    @functools.wraps(original)
    def loglikelihood_rolling(self, requests, *args, **kwargs):
        for r in requests:
            if isinstance(getattr(r, "doc", None), dict) and "peeval_window" in r.doc:
                raise ValueError(NOT_A_PEEVAL_MODEL.format(task=r.task_name or "peeval_ppl"))
        return original(self, requests, *args, **kwargs)

    loglikelihood_rolling._peeval_refuses_windows = True
    HFLM.loglikelihood_rolling = loglikelihood_rolling


class PerplexityTask(ConfigurableTask):
    """A ``loglikelihood_rolling`` task whose metrics are named by the lengths asked for."""

    def __init__(self, config=None, **kwargs):  # the YAML's ``class`` key is not a TaskConfig field
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        check_metadata(config.get("metadata") or {})  # before the corpus is read
        refuse_generic_models()
        super().__init__(config=config, **kwargs)

    def lengths(self) -> list[int]:
        return _lengths(self.config.metadata or {})

    def whole_documents(self, limit, samples=None):
        """``--limit`` keeps whole documents: rows are (document, length), document-major, so a limit
        that would end inside a document is rounded up to its end and no length is dropped."""
        if not limit or samples:
            return limit
        n = len(self.lengths())
        return math.ceil(int(limit) / n) * n

    def build_all_requests(self, *, limit=None, samples=None, **kwargs):  # lm-eval slices by the limit here
        return super().build_all_requests(limit=self.whole_documents(limit, samples), samples=samples, **kwargs)

    def doc_iterator(self, *, rank: int = 0, limit=None, world_size: int = 1, samples=None):  # and here
        limit = self.whole_documents(limit, samples)
        return super().doc_iterator(rank=rank, limit=limit, world_size=world_size, samples=samples)

    @functools.cached_property
    def _buckets(self) -> list[int]:
        """First context size of each loss-by-position bucket (validated once, not per scored row)."""
        md = check_metadata(self.config.metadata or {})
        return bucket_starts(md["lengths"][-1], md["position_buckets"]) if md["position_buckets"] else []

    def process_results(self, doc, results):
        r = results[0]
        if not isinstance(r, dict):  # another lm-eval model class that scored the whole documents
            raise TypeError(NOT_A_PEEVAL_MODEL.format(task=self.config.task))
        if NOT_APPLICABLE in r:  # a learned position table shorter than this length: no cell
            return {}
        L = doc["peeval_window"]
        out = {
            ppl_metric("ppl", L): (r["ll"], r["tokens"]),
            ppl_metric("bpb", L): (r["ll"], r["bytes"]),
            ppl_metric("tokens", L): r["tokens"],
            ppl_metric("windows", L): r["windows"],
        }
        if doc["peeval_longest"] == L and r.get("nll_pos"):  # the loss by position, from the longest windows
            out.update({position_metric(p): tuple(v) for p, v in zip(self._buckets, r["nll_pos"], strict=True)})
        return out

    def aggregation(self):
        agg = {}
        for L in self.lengths():
            ppl = functools.partial(_ppl, where=f"{self.config.task} {ppl_metric('ppl', L)}")
            bpb = functools.partial(_bpb, where=f"{self.config.task} {ppl_metric('bpb', L)}")
            agg.update({ppl_metric("ppl", L): ppl, ppl_metric("bpb", L): bpb, ppl_metric("tokens", L): sum,
                        ppl_metric("windows", L): sum})  # fmt: skip
        for p in self._buckets:
            agg[position_metric(p)] = _mean_nll
        return agg

    def higher_is_better(self):
        return {k: higher_is_better(k) for k in self.aggregation()}  # peeval.records.METRICS: ppl, bpb lower
