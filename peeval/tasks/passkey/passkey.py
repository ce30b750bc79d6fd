"""peeval_passkey: the Landmark-attention passkey prompt of the TAPE / LongLoRA scripts.

    <intro>\\n<filler … filler>\\nThe pass key is K. Remember it. K is the pass key.\\n<filler …>\\n<question>

K is a random integer in 1..50000; the filler is repeated until the prompt reaches the
target length in tokens, and the needle sits at the chosen depth (0 = right after the
intro, 1 = right before the question). Grid and sizes from ``--metadata``:
``lengths`` (default 512…4096), ``depths`` (default 0, .25, .5, .75, 1), ``per_cell``
(default 5), ``seed`` (0), ``tokenizer`` (a tokenizer dir used to count tokens; default the
evaluated model's own, which ``peeval eval`` and plain ``lm_eval`` hand over as ``pretrained``;
a standalone build falls back to the mirror's GPT-2 BPE, else 4 characters a token). Same
metadata and tokenizer, same prompts, byte for byte. A prompt longer than the model's
``max_length`` is an error naming both (peeval.harness.plugin), never left-truncated to a zero.
Greedy generation of a few tokens; exact match of the first integer generated, reported
per cell (``acc@<length>@<depth>``) and overall (``acc``). Bad metadata (a depth outside
[0, 1], a length that is not a positive integer) is one ``ValueError`` naming the key.
"""

from __future__ import annotations

import math
import random
import re
from functools import lru_cache
from typing import Annotated

import datasets
from lm_eval.api.task import ConfigurableTask
from pydantic import BeforeValidator, Field

from peeval.records import passkey_metric
from peeval.settings import Allowed, Invalid, Lenient, integer, nonempty, one_or_list, validated
from peeval.tasks.metadata_keys import check_keys

INTRO = (
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there."
)
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = "What is the pass key? The pass key is"
DEFAULTS = {"lengths": [512, 1024, 2048, 4096], "depths": [0.0, 0.25, 0.5, 0.75, 1.0], "per_cell": 5, "seed": 0}
_DEPTH = "a number in [0, 1] (0 = after the intro, 1 = before the question)"


@lru_cache(maxsize=4)
def _counter(tokenizer: str | None, gguf_file: str | None = None):
    """A function counting tokens of a string: the evaluated model's tokenizer when the task knows
    it, else the mirror's GPT-2 BPE (a standalone build), else 4 characters a token."""
    from transformers import AutoTokenizer, GPT2TokenizerFast

    from peeval.data import mirror_root

    if tokenizer:
        tok = AutoTokenizer.from_pretrained(tokenizer, **({"gguf_file": gguf_file} if gguf_file else {}))
    else:
        root = mirror_root()
        if root is None or not (root / "tokenizers" / "gpt2" / "vocab.json").exists():
            return lambda s: max(1, len(s) // 4)
        d = root / "tokenizers" / "gpt2"
        tok = GPT2TokenizerFast(vocab=str(d / "vocab.json"), merges=str(d / "merges.txt"))
    return lambda s: len(tok(s, add_special_tokens=False)["input_ids"])


def make_prompt(length: int, depth: float, key: int, count) -> str:
    """The prompt of about ``length`` tokens with the needle at relative ``depth``."""
    needle = NEEDLE.format(key=key)
    fixed = count("\n".join([INTRO, needle, QUESTION])) + 2
    per_filler = count(" " + FILLER)
    n = max(0, (length - fixed) // per_filler)
    before = round(n * depth)
    parts = [INTRO]
    if before:
        parts.append(" ".join([FILLER] * before))
    parts.append(needle)
    if n - before:
        parts.append(" ".join([FILLER] * (n - before)))
    parts.append(QUESTION)
    return "\n".join(parts)


class Grid(Lenient):
    """What peeval_passkey reads from its metadata (the other keys: ``check_keys``)."""

    lengths: Annotated[
        list[Annotated[integer(1), Allowed("a positive integer (prompt tokens)")]],
        BeforeValidator(one_or_list),
        nonempty("a non-empty list"),
    ] = DEFAULTS["lengths"]
    depths: Annotated[
        list[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False), Allowed(_DEPTH)]],
        BeforeValidator(one_or_list),
        nonempty("a non-empty list"),
    ] = DEFAULTS["depths"]
    per_cell: integer(1) = DEFAULTS["per_cell"]
    seed: integer(0) = DEFAULTS["seed"]
    tokenizer: Annotated[str | None, Allowed("a tokenizer folder")] = None


def check_metadata(metadata: dict) -> dict:
    """The validated grid: ``lengths`` ints >= 1, ``depths`` numbers in [0, 1] (a depth outside
    builds a prompt longer than the length it is filed under), ``per_cell`` int >= 1, ``seed``
    int. Raised where the task reads its metadata, so ``lm_eval`` and ``peeval eval`` agree.
    The values are returned as given (a depth's spelling seeds its cell's keys)."""
    check_keys("peeval_passkey", metadata)
    md = {**DEFAULTS, **{k: v for k, v in metadata.items() if k in (*DEFAULTS, "tokenizer")}}
    try:
        validated(Grid, md)
    except Invalid as e:
        p = e.problem
        if p.item is not ...:
            raise ValueError(f"peeval_passkey metadata {p.key}: {p.item!r} is not {p.item_text}") from None
        raise ValueError(f"peeval_passkey metadata {p.key}={p.value!r}: must be {p.text}") from None
    md["lengths"], md["depths"] = one_or_list(md["lengths"]), one_or_list(md["depths"])
    return md


def tokenizer_source(metadata: dict) -> tuple[str | None, str | None]:
    """Whose tokens a length counts: ``tokenizer``, else the evaluated model's ``pretrained`` (plain
    lm_eval merges --model_args into every task's metadata; ``peeval eval`` passes the same two),
    with its ``gguf_file``. A 512-token cell is 512 tokens of the model being evaluated."""
    if metadata.get("tokenizer"):
        return metadata["tokenizer"], None
    return metadata.get("pretrained"), metadata.get("gguf_file")


def build_dataset(**metadata) -> datasets.DatasetDict:
    md = check_metadata(metadata)
    count = _counter(*tokenizer_source(metadata))
    rows = []
    for length in md["lengths"]:
        for depth in md["depths"]:
            rng = random.Random(f"{md['seed']}-{length}-{depth}")
            for i in range(int(md["per_cell"])):
                key = rng.randint(1, 50000)
                rows.append({"prompt": make_prompt(int(length), float(depth), key, count), "key": str(key),
                             "length": int(length), "depth": float(depth), "index": i})  # fmt: skip
    # interleave the cells so that --limit samples the whole grid
    rows.sort(key=lambda r: (r["index"], r["length"], r["depth"]))
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def first_integer(text: str) -> str | None:
    m = re.search(r"\d+", text)
    return m.group(0) if m else None


class PasskeyTask(ConfigurableTask):
    """Metrics named by the grid cells asked for."""

    def __init__(self, config=None, **kwargs):
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        check_metadata(config.get("metadata") or {})  # before any prompt is built
        super().__init__(config=config, **kwargs)

    def _cells(self):
        md = check_metadata(self.config.metadata or {})
        return [(int(L), float(d)) for L in md["lengths"] for d in md["depths"]]

    def whole_rounds(self, limit, samples=None):
        """``--limit N`` applies per length: N prompts of every length, rounded up to whole rounds of the grid (the
        rows are index-major: one round holds every (length, depth) cell once), so no length is dropped and every
        cell of a length gets as many prompts. Before, ``--limit 2`` scored two depths of the first length only."""
        if not limit or samples:
            return limit
        md = check_metadata(self.config.metadata or {})
        rounds = math.ceil(int(limit) / len(md["depths"]))
        return min(rounds, int(md["per_cell"])) * len(self._cells())

    def build_all_requests(self, *, limit=None, samples=None, **kwargs):  # lm-eval slices by the limit here
        return super().build_all_requests(limit=self.whole_rounds(limit, samples), samples=samples, **kwargs)

    def doc_iterator(self, *, rank: int = 0, limit=None, world_size: int = 1, samples=None):  # and here
        limit = self.whole_rounds(limit, samples)
        return super().doc_iterator(rank=rank, limit=limit, world_size=world_size, samples=samples)

    def process_results(self, doc, results):
        hit = float(first_integer(results[0]) == doc["key"])
        return {"acc": hit, passkey_metric(doc["length"], doc["depth"]): hit}

    def aggregation(self):
        def mean(xs):
            return sum(xs) / len(xs) if xs else float("nan")

        return {"acc": mean, **{passkey_metric(L, d): mean for L, d in self._cells()}}

    def higher_is_better(self):
        return dict.fromkeys(self.aggregation(), True)
