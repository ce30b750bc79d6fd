"""Seeded generators for the seeds' diagnostic tasks (a shared contract: the trainer imports them).

``generate(task, split, n, seed=0, **params)`` returns ``n`` dicts ``{"prompt", "answer", "meta"}``
whose prompt and answer are whitespace-separated tokens of the task's small vocabulary
(``tokenizer(task)``): the model sees ``prompt`` and must produce ``answer`` (loss and exact match
on the answer only). Same (task, split, n, seed, params) -> byte-identical output: every split
draws from its own ``random.Random`` seeded by a string (stable across processes).

Tasks (defaults are small CPU sizes; ``profile="paper"`` selects the papers' sizes, and every
size is a parameter):

- ``indirect_indexing`` (PoPE B.1): 20-40 distinct letters of [A-Za-z] drawn without replacement,
  a source character from the string, a non-zero shift in [-15, 15] keeping the target inside the
  string, sign always printed; ``<string> , <char> , <±shift> ,`` -> ``<target>``; one token per
  character (the shift's sign and digits are separate tokens).
- ``flip_flop`` (Liu et al. 2023, CoPE 5.1): ``n_instr`` instruction/bit pairs (paper 256), the first
  a write, the last a read; in between ``i`` with probability ``p_i`` and ``w``/``r`` with
  ``(1-p_i)/2`` each; every read's bit is the last written bit. The prompt ends with the final
  ``r``, the answer is its bit; the bits of earlier reads are in the prompt, and they are the task's
  other deterministic tokens (``deterministic_positions``): Liu et al. train on and score every read.
  Splits: ``test`` p_i 0.8, ``ood_sparse`` 0.98, ``ood_dense`` 0.1.
- ``selective_copy`` (Gu & Dao, CoPE 5.2): 16 symbols = 14 data tokens + blank ``.`` + marker
  ``=``; ``n_copy`` data tokens (paper 256) scattered among ``n_blank`` blanks (paper 256; OOD dense
  half, sparse double), then the marker; the answer is the data tokens in order.
- ``counting`` (CoPE 5.3): ``n_vars`` variables (1/3/5), each set to 0 first, then ``n_ops`` random
  operations (uniform in [1, max_ops], paper 512) ``v = 0 ;`` / ``v ++ ;`` / ``pass ;`` with weights
  1/7/``w_pass`` (50; OOD ``ood_long`` 100, ``ood_short`` 10) on a uniformly chosen variable, an
  increment that would pass ``max_value`` (10) redrawn among set/pass; then ``print v`` -> value.
- ``addition`` (TAPE 5.1 / McLeish et al.): ``a + b =`` -> ``c`` with every number written least
  significant digit first, one token per digit. ``train``: operand lengths (len_a, len_b) drawn
  uniformly from [1, n_max]^2 (bucketed: every pair equally frequent), ``test``: every cell of
  [1, 2 n_max]^2, ``per_cell`` examples each (the ``n`` argument is ignored), cells interleaved so a
  prefix covers the whole grid; ``meta`` holds ``len_a``/``len_b``.

Every task also has the split ``val`` (not an lm-eval task, so not in ``splits``): held-out examples of
the *training* distribution from their own random stream, what ``peeval train --task`` validates on.
Addition's ``val`` covers every in-distribution cell [1, n_max]^2 alike, at least ``VAL_PER_CELL``
examples each (``n`` is a lower bound): a validation drawn from ``test`` would be mostly lengths the
model never trained on.
"""

from __future__ import annotations

import random
import string

from peeval.registry import DIAG_TASKS, GEN_PROFILES

TASKS: tuple[str, ...] = DIAG_TASKS  # the names live in peeval.registry (records and ingest read them there)
#: the training distribution's held-out split (validation during training; no lm-eval task)
VAL_SPLIT = "val"
#: addition's validation: at least this many examples per in-distribution (len_a, len_b) cell
VAL_PER_CELL = 10

_SPLITS = {
    "indirect_indexing": ["train", "test"],
    "flip_flop": ["train", "test", "ood_sparse", "ood_dense"],
    "selective_copy": ["train", "test", "ood_dense", "ood_sparse"],
    "counting": ["train", "test", "ood_long", "ood_short"],
    "addition": ["train", "test"],
}

#: per-task defaults: small CPU sizes, and the papers' sizes under ``profile="paper"``
DEFAULTS = {
    "indirect_indexing": {"cpu": {"min_len": 20, "max_len": 40, "max_shift": 15}},
    "flip_flop": {"cpu": {"n_instr": 32, "p_i": 0.8, "p_i_ood_sparse": 0.98, "p_i_ood_dense": 0.1},
                  "paper": {"n_instr": 256}},
    "selective_copy": {"cpu": {"n_copy": 16, "n_blank": 16, "n_blank_ood_dense": None, "n_blank_ood_sparse": None},
                       "paper": {"n_copy": 256, "n_blank": 256}},
    "counting": {"cpu": {"n_vars": 1, "max_ops": 64, "w_set": 1, "w_incr": 7, "w_pass": 50, "w_pass_ood_long": 100,
                         "w_pass_ood_short": 10, "max_value": 10},
                 "paper": {"max_ops": 512}},
    "addition": {"cpu": {"n_max": 4, "per_cell": 3}, "paper": {"n_max": 40, "per_cell": 100}},
}  # fmt: skip

LETTERS = string.ascii_uppercase + string.ascii_lowercase
COPY_DATA = list("ABCDEFGHIJKLMN")  # 14 data tokens; with blank and marker a vocabulary of 16
BLANK, MARKER = ".", "="
VARIABLES = "abcde"


def splits(task: str) -> list[str]:
    """The split names of ``task``: ``train``, ``test`` and its OOD splits."""
    _check_task(task)
    return list(_SPLITS[task])


def params(task: str, profile: str = "cpu", **overrides) -> dict:
    """The task's effective parameters (defaults of ``profile`` updated by ``overrides``)."""
    _check_task(task)
    if profile not in GEN_PROFILES:
        raise ValueError(f"unknown diagnostics profile {profile!r}: use 'cpu' or 'paper'")
    p = dict(DEFAULTS[task]["cpu"])
    if profile == "paper":
        p.update(DEFAULTS[task].get("paper", {}))
    unknown = sorted(set(overrides) - set(p))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for diagnostic {task!r}; allowed: {sorted(p)}")
    p.update(overrides)
    return p


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown diagnostic task {task!r}; choose one of {list(TASKS)}")


def generate(task: str, split: str, n: int, seed: int = 0, profile: str = "cpu", **overrides) -> list[dict]:
    """``n`` examples of ``task``/``split`` (addition ``test``: the full grid, ``n`` ignored; addition
    ``val``: at least ``n``, every in-distribution cell alike)."""
    if split not in [*splits(task), VAL_SPLIT]:
        raise ValueError(f"unknown split {split!r} for diagnostic {task!r}; choose one of {[*splits(task), VAL_SPLIT]}")
    p = params(task, profile, **overrides)
    rng = random.Random(f"peeval-diag/{task}/{split}/{seed}")
    return _GEN[task](rng, split, int(n), p)


def deterministic_positions(task: str, prompt: str) -> list[int]:
    """Indices of the prompt's tokens that its earlier tokens determine and a model is trained and
    scored on besides the answer: flip-flop's bit after every ``r`` (Liu et al.'s reads); [] elsewhere."""
    _check_task(task)
    if task != "flip_flop":
        return []
    toks = prompt.split()
    return [i + 1 for i in range(0, len(toks) - 1, 2) if toks[i] == "r"]


def _example(prompt: list[str], answer: list[str], **meta) -> dict:
    return {"prompt": " ".join(prompt), "answer": " ".join(answer), "meta": meta}


def _indirect_indexing(rng: random.Random, split: str, n: int, p: dict) -> list[dict]:
    out = []
    for _ in range(n):
        length = rng.randint(p["min_len"], p["max_len"])
        letters = rng.sample(LETTERS, length)
        src = rng.randrange(length)
        shifts = [s for s in range(-p["max_shift"], p["max_shift"] + 1) if s and 0 <= src + s < length]
        shift = rng.choice(shifts)
        sign = "+" if shift > 0 else "-"
        prompt = [*letters, ",", letters[src], ",", sign, *str(abs(shift)), ","]
        out.append(_example(prompt, [letters[src + shift]], length=length, shift=shift))
    return out


def _flip_flop(rng: random.Random, split: str, n: int, p: dict) -> list[dict]:
    p_i = {"ood_sparse": p["p_i_ood_sparse"], "ood_dense": p["p_i_ood_dense"]}.get(split, p["p_i"])
    p_w = (1 - p_i) / 2
    out = []
    for _ in range(n):
        tokens, memory = [], None
        for k in range(p["n_instr"]):
            if k == 0:
                op = "w"
            elif k == p["n_instr"] - 1:
                op = "r"
            else:
                u = rng.random()
                op = "i" if u < p_i else ("w" if u < p_i + p_w else "r")
            if op == "r":
                bit = memory
            else:
                bit = str(rng.randint(0, 1))
                if op == "w":
                    memory = bit
            tokens += [op, bit]
        n_reads = tokens[0::2].count("r")
        out.append(_example(tokens[:-1], [tokens[-1]], p_i=p_i, reads=n_reads))
    return out


def _selective_copy(rng: random.Random, split: str, n: int, p: dict) -> list[dict]:
    n_blank = {
        "ood_dense": p["n_blank_ood_dense"] or p["n_blank"] // 2,
        "ood_sparse": p["n_blank_ood_sparse"] or p["n_blank"] * 2,
    }.get(split, p["n_blank"])
    out = []
    for _ in range(n):
        data = [rng.choice(COPY_DATA) for _ in range(p["n_copy"])]
        total = p["n_copy"] + n_blank
        slots = set(rng.sample(range(total), p["n_copy"]))
        it = iter(data)
        seq = [next(it) if i in slots else BLANK for i in range(total)]
        out.append(_example([*seq, MARKER], data, n_copy=p["n_copy"], n_blank=n_blank))
    return out


def _counting(rng: random.Random, split: str, n: int, p: dict) -> list[dict]:
    w_pass = {"ood_long": p["w_pass_ood_long"], "ood_short": p["w_pass_ood_short"]}.get(split, p["w_pass"])
    names = VARIABLES[: p["n_vars"]]
    if len(names) < p["n_vars"]:
        raise ValueError(f"counting supports at most {len(VARIABLES)} variables, got n_vars={p['n_vars']}")
    out = []
    for _ in range(n):
        values, tokens = {}, []
        for v in rng.sample(names, len(names)):
            values[v] = 0
            tokens += [v, "=", "0", ";"]
        for _ in range(rng.randint(1, p["max_ops"])):
            v = rng.choice(names)
            ops, weights = ["set", "incr", "pass"], [p["w_set"], p["w_incr"], w_pass]
            if values[v] >= p["max_value"]:
                ops, weights = ["set", "pass"], [p["w_set"], w_pass]
            op = rng.choices(ops, weights)[0]
            if op == "set":
                values[v] = 0
                tokens += [v, "=", "0", ";"]
            elif op == "incr":
                values[v] += 1
                tokens += [v, "++", ";"]
            else:
                tokens += ["pass", ";"]
        target = rng.choice(names)
        out.append(_example([*tokens, "print", target], [str(values[target])], n_vars=p["n_vars"], w_pass=w_pass))
    return out


def _number(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)


def _addition_example(rng: random.Random, len_a: int, len_b: int) -> dict:
    a, b = _number(rng, len_a), _number(rng, len_b)
    prompt = [*str(a)[::-1], "+", *str(b)[::-1], "="]
    return _example(prompt, list(str(a + b)[::-1]), len_a=len_a, len_b=len_b)


def _addition(rng: random.Random, split: str, n: int, p: dict) -> list[dict]:
    n_max = p["n_max"]
    if split == "train":
        return [_addition_example(rng, rng.randint(1, n_max), rng.randint(1, n_max)) for _ in range(n)]
    if split == VAL_SPLIT:  # the training lengths only, every cell alike (cells interleaved)
        cells = [(la, lb) for la in range(1, n_max + 1) for lb in range(1, n_max + 1)]
        k = max(VAL_PER_CELL, -(-n // len(cells)))
        return [_addition_example(rng, la, lb) for _ in range(k) for la, lb in cells]
    cells = [(la, lb) for la in range(1, 2 * n_max + 1) for lb in range(1, 2 * n_max + 1)]
    return [_addition_example(rng, la, lb) for _ in range(p["per_cell"]) for la, lb in cells]


_GEN = {
    "indirect_indexing": _indirect_indexing,
    "flip_flop": _flip_flop,
    "selective_copy": _selective_copy,
    "counting": _counting,
    "addition": _addition,
}


def vocabulary(task: str) -> list[str]:
    """Every symbol the task's prompts and answers use (without special tokens)."""
    _check_task(task)
    return {
        "indirect_indexing": [*LETTERS, *string.digits, ",", "+", "-"],
        "flip_flop": ["w", "i", "r", "0", "1"],
        "selective_copy": [*COPY_DATA, BLANK, MARKER],
        "counting": [*VARIABLES, "=", "++", ";", "pass", "print", *map(str, range(0, 100))],
        "addition": [*string.digits, "+", "="],
    }[task]


SPECIAL = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}


def tokenizer(task: str):
    """A ``transformers.PreTrainedTokenizerFast``: a ``tokenizers`` WordLevel vocabulary over the
    task's symbols split on whitespace, plus bos/eos/pad/unk (ids 0-3). No special tokens are added
    on encode (lm-eval scores without them); ``save_pretrained`` makes it loadable by HFLM."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([*SPECIAL.values(), *vocabulary(task)])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=SPECIAL["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL)
