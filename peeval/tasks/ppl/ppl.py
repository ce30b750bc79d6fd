"""peeval_ppl_<corpus>: perplexity by context length on long documents.

Each document is scored once per length L (``--metadata '{"lengths": [512, 2048]}'``,
default 512…16384): disjoint windows of exactly L tokens of the model's tokenizer, each one
forward of length L, every predicted token scored (L−1 per window; the remainder shorter
than L is dropped). ``stride`` < L switches to the sliding protocol (each new token scored
once, with up to L−1 tokens of context); the protocol is named in every metric's name-free
config (``ppl_protocol``). Reported per length: token perplexity ``ppl@L`` (``inf`` when the
model explodes), bits per byte ``bpb@L`` (comparable across tokenizers), and the counts
``tokens@L`` and ``windows@L``. Windows are cut by the peeval model wrappers, which know the
tokenizer (``loglikelihood_rolling`` requests carry ``peeval_window``); other lm-eval models
are refused with a clear error. ``max_docs`` / ``max_windows`` (>= 1, or null for no limit)
bound the cost on a CPU. Bad metadata is one ``ValueError`` naming the key, raised when the
task is built (so ``lm_eval`` and ``peeval eval`` agree); a metric is never NaN.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated

import datasets
from lm_eval.api.task import ConfigurableTask
from pydantic import BeforeValidator

from peeval.records import higher_is_better, ppl_metric
from peeval.settings import Allowed, Invalid, Lenient, integer, nonempty, one_or_list, validated
from peeval.tasks.metadata_keys import check_keys

DEFAULT_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
_NONE_SCORED = "{}: no token was scored (no evaluated document has that many tokens): use shorter lengths"


_NO_LIMIT = "an integer >= 1 or null for no limit"


class Windows(Lenient):
    """What peeval_ppl reads from its metadata (the other keys: ``check_keys``)."""

    lengths: Annotated[
        list[Annotated[integer(2), Allowed("an integer >= 2 (a window of L tokens scores L-1)")]],
        BeforeValidator(one_or_list),
        nonempty("a non-empty list of integers >= 2"),
        Allowed("a non-empty list of integers >= 2"),
    ] = list(DEFAULT_LENGTHS)
    stride: Annotated[integer(1, null=True), Allowed("an integer >= 1 (omit it for disjoint windows)")] = None
    max_windows: Annotated[integer(1, null=True), Allowed(_NO_LIMIT)] = None
    max_docs: Annotated[integer(1, null=True), Allowed(_NO_LIMIT)] = None


def check_metadata(metadata: dict) -> dict:
    """The validated window settings: ``lengths`` (sorted ints >= 2: a window of L tokens scores
    L-1 of them), ``stride`` (None, or 1 <= stride <= min(lengths)), ``max_windows`` and
    ``max_docs`` (None for no limit, else >= 1). Raised here, where the task reads its metadata,
    so plain ``lm_eval`` and ``peeval eval`` fail the same way, before any model work."""
    check_keys("peeval_ppl", metadata)
    try:
        w = validated(Windows, metadata)
    except Invalid as e:
        p = e.problem
        shown, text = (p.item, p.item_text) if p.item is not ... else (p.value, p.text)
        raise ValueError(f"peeval_ppl metadata {p.key}={shown!r}: must be {text}") from None
    lengths = sorted(set(w.lengths))
    if w.stride is not None and w.stride > lengths[0]:
        raise ValueError(
            f"peeval_ppl metadata stride={w.stride} is larger than length {lengths[0]}: sliding windows need "
            "1 <= stride <= every length (omit stride for disjoint windows)"
        )
    return {"lengths": lengths, "stride": w.stride, "max_windows": w.max_windows, "max_docs": w.max_docs}


def _lengths(metadata: dict) -> list[int]:
    return check_metadata(metadata)["lengths"]


def build_dataset(hub_id: str, split: str = "test", **metadata) -> datasets.DatasetDict:
    """Rows (document, length): document-major, so ``--limit`` keeps every length. A length
    that a document cannot give (fewer bytes than L, hence fewer than L tokens) is an error
    naming the document, not a NaN row."""
    from peeval.data import load_dataset, record_documents

    md = check_metadata(metadata)
    docs = load_dataset(hub_id, split=split)
    if md["max_docs"]:
        docs = docs.select(range(min(md["max_docs"], len(docs))))
    record_documents(docs["text"])  # the run's provenance: the documents scored, not the whole split
    longest = md["lengths"][-1]
    for i, text in enumerate(docs["text"]):
        n_bytes = len(text.encode("utf-8"))
        if n_bytes < longest:
            raise ValueError(
                f"peeval_ppl ({hub_id}) metadata lengths: length {longest} is more than document {i} can give "
                f"({n_bytes} bytes, so fewer tokens): use lengths <= {n_bytes}" + (f" or max_docs <= {i}" if i else "")
            )
    rows = []
    for i, text in enumerate(docs["text"]):
        for L in md["lengths"]:
            rows.append({"doc_id": i, "text": text, "peeval_window": L, "peeval_stride": md["stride"] or L,
                         "peeval_max_windows": md["max_windows"] or 0})  # fmt: skip
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})


def pg19(**metadata):
    return build_dataset("deepmind/pg19", **metadata)


def proof_pile(**metadata):
    return build_dataset("hoskinson-center/proof-pile", **metadata)


def _ppl(items, where: str = "ppl") -> float:
    ll, n = sum(i[0] for i in items), sum(i[1] for i in items)
    if n == 0:  # never a NaN row: no document gave a full window
        raise ValueError(
            f"{where}: no token was scored (no evaluated document has that many tokens): use shorter lengths"
        )
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
    return -ll / (b * math.log(2))


NOT_A_PEEVAL_MODEL = (
    "{task} cuts exact token windows with the model's tokenizer: run it with a peeval model "
    "(--model peeval, peeval-<pe> or peeval-llama), not a generic lm-eval model"
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

    def process_results(self, doc, results):
        r = results[0]
        if not isinstance(r, dict):  # another lm-eval model class that scored the whole documents
            raise TypeError(NOT_A_PEEVAL_MODEL.format(task=self.config.task))
        L = doc["peeval_window"]
        return {
            ppl_metric("ppl", L): (r["ll"], r["tokens"]),
            ppl_metric("bpb", L): (r["ll"], r["bytes"]),
            ppl_metric("tokens", L): r["tokens"],
            ppl_metric("windows", L): r["windows"],
        }

    def aggregation(self):
        agg = {}
        for L in self.lengths():
            ppl = functools.partial(_ppl, where=f"{self.config.task} {ppl_metric('ppl', L)}")
            bpb = functools.partial(_bpb, where=f"{self.config.task} {ppl_metric('bpb', L)}")
            agg.update({ppl_metric("ppl", L): ppl, ppl_metric("bpb", L): bpb, ppl_metric("tokens", L): sum,
                        ppl_metric("windows", L): sum})  # fmt: skip
        return agg

    def higher_is_better(self):
        return {k: higher_is_better(k) for k in self.aggregation()}  # peeval.records.METRICS: ppl, bpb lower
