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
are refused with a clear error. ``max_docs`` / ``max_windows`` bound the cost on a CPU.
"""

from __future__ import annotations

import math

import datasets
from lm_eval.api.task import ConfigurableTask

DEFAULT_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)


def _lengths(metadata: dict) -> list[int]:
    lengths = metadata.get("lengths", DEFAULT_LENGTHS)
    if isinstance(lengths, (int, str)):
        lengths = [lengths]
    return sorted({int(x) for x in lengths})


def build_dataset(hub_id: str, split: str = "test", **metadata) -> datasets.DatasetDict:
    """Rows (document, length): document-major, so ``--limit`` keeps every length."""
    from peeval.data import load_dataset

    docs = load_dataset(hub_id, split=split)
    if metadata.get("max_docs"):
        docs = docs.select(range(min(int(metadata["max_docs"]), len(docs))))
    stride = metadata.get("stride")
    max_windows = metadata.get("max_windows")
    rows = []
    for i, text in enumerate(docs["text"]):
        for L in _lengths(metadata):
            rows.append({"doc_id": i, "text": text, "peeval_window": L, "peeval_stride": int(stride or L),
                         "peeval_max_windows": int(max_windows or 0)})  # fmt: skip
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})


def pg19(**metadata):
    return build_dataset("deepmind/pg19", **metadata)


def proof_pile(**metadata):
    return build_dataset("hoskinson-center/proof-pile", **metadata)


def _ppl(items) -> float:
    ll, n = sum(i[0] for i in items), sum(i[1] for i in items)
    if n == 0:
        return float("nan")
    try:
        return math.exp(-ll / n)
    except OverflowError:  # an exploding model: report it, don't crash
        return float("inf")


def _bpb(items) -> float:
    ll, b = sum(i[0] for i in items), sum(i[1] for i in items)
    return -ll / (b * math.log(2)) if b else float("nan")


class PerplexityTask(ConfigurableTask):
    """A ``loglikelihood_rolling`` task whose metrics are named by the lengths asked for."""

    def __init__(self, config=None, **kwargs):  # the YAML's ``class`` key is not a TaskConfig field
        super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

    def lengths(self) -> list[int]:
        return _lengths(self.config.metadata or {})

    def process_results(self, doc, results):
        r = results[0]
        if not isinstance(r, dict):
            raise TypeError(
                f"{self.config.task} cuts exact token windows with the model's tokenizer: run it with a peeval "
                "model (--model peeval, peeval-<pe> or peeval-llama), not a generic lm-eval model"
            )
        L = doc["peeval_window"]
        return {
            f"ppl@{L}": (r["ll"], r["tokens"]),
            f"bpb@{L}": (r["ll"], r["bytes"]),
            f"tokens@{L}": r["tokens"],
            f"windows@{L}": r["windows"],
        }

    def aggregation(self):
        agg = {}
        for L in self.lengths():
            agg.update({f"ppl@{L}": _ppl, f"bpb@{L}": _bpb, f"tokens@{L}": sum, f"windows@{L}": sum})
        return agg

    def higher_is_better(self):
        return {k: not k.startswith(("ppl", "bpb")) for k in self.aggregation()}
