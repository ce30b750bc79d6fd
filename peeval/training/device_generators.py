"""The diagnostic tasks' examples drawn on a torch device, a whole batch at once (issue 64): a GPU trainer
draws fresh examples every step without the host, in fixed shapes a compiled step (CUDA graphs) can replay.

``device_batch(task, batch_size, generator=g, device=d, split="train", profile="cpu", **task_params)``
returns ``input_ids`` / ``attention_mask`` / ``labels`` in ``diagnostics.encode_examples``'s format exactly
(``prompt answer <eos>`` with no BOS, right-padded with ``<pad>``, labels -100 on the prompt and the padding
except flip-flop's reads), always ``max_length(task, split, profile, **task_params)`` columns wide (the longest
example the task's parameters allow). Every draw comes from ``generator`` (a ``torch.Generator`` on ``device``);
there is no Python loop over examples and no read-back to the host (counting's operations are one log-depth
scan over the steps, addition's carries one ``cummax``). Call it eagerly beside a compiled step, not inside one:
dynamo breaks the graph at every draw that passes ``generator=``.

``peeval.tasks.diagnostics.generators`` stays the reference: these are its distributions (same tasks, splits,
parameters and token ids), not its examples (a different random stream). Addition's ``val`` and ``test`` give
row ``i`` the length cell ``i mod cells`` (the reference's interleaving), so a batch of ``k * cells`` rows covers
the grid ``k`` times. ``tests/training/test_device_generators.py`` checks the format (each row's answer
recomputed from its prompt) and every statistic the task's definition fixes against the reference's.
"""

from __future__ import annotations

import functools

import torch

from ..tasks.diagnostics import generators as gen

BOS, EOS, PAD, UNK = 0, 1, 2, 3  # the task tokenizers' special ids (generators.SPECIAL's order)
IGNORE = -100  # encode_examples' label for an unscored position


def _ids(task: str) -> dict[str, int]:
    """Symbol -> token id of ``generators.tokenizer(task)`` (specials first, then ``vocabulary`` in order)."""
    return {s: len(gen.SPECIAL) + i for i, s in enumerate(gen.vocabulary(task))}


def _check(task: str, split: str, profile: str, task_params: dict) -> dict:
    """The task's effective parameters, every input refused with one line naming it unless the
    reference generator would draw from it too."""
    allowed = [*gen.splits(task), gen.VAL_SPLIT]  # raises on an unknown task
    if split not in allowed:
        raise ValueError(f"split={split!r} is not a split of diagnostic {task!r}; choose one of {allowed}")
    p = gen.params(task, profile, **task_params)
    need = {
        "indirect_indexing": lambda: [
            ("min_len", p["min_len"] >= 2, "at least 2 (a shift must stay inside the string)"),
            ("max_len", p["min_len"] <= p["max_len"] <= len(gen.LETTERS), f"in [min_len, {len(gen.LETTERS)}]"),
            ("max_shift", p["max_shift"] >= 1, "at least 1"),
        ],
        "flip_flop": lambda: (
            [("n_instr", p["n_instr"] >= 2, "at least 2 (a write first, a read last)")]
            + [(k, 0 <= p[k] <= 1, "a probability in [0, 1]") for k in ("p_i", "p_i_ood_sparse", "p_i_ood_dense")]
        ),
        "selective_copy": lambda: [("n_copy", p["n_copy"] >= 1, "at least 1"), ("n_blank", p["n_blank"] >= 0, ">= 0")],
        "counting": lambda: [
            ("n_vars", 1 <= p["n_vars"] <= len(gen.VARIABLES), f"in [1, {len(gen.VARIABLES)}]"),
            ("max_ops", p["max_ops"] >= 1, "at least 1"),
            ("max_value", 0 <= p["max_value"] <= 99, "in [0, 99] (the values are tokens 0-99)"),
            *[(k, p[k] >= 0, "a weight >= 0") for k in sorted(p) if k.startswith("w_")],
            ("w_set", p["w_set"] + _w_pass(p, split) > 0, f"> 0 where {split}'s w_pass is 0 (a variable at max_value)"),
        ],
        "addition": lambda: [("n_max", p["n_max"] >= 1, "at least 1")],
    }[task]()  # fmt: skip (the lambdas: only this task's keys are read)
    for name, ok, what in need:
        if not ok:
            raise ValueError(f"{task} parameter {name}={p[name]!r}: must be {what}")
    return p


def max_length(task: str, split: str = "train", profile: str = "cpu", **task_params) -> int:
    """The width of ``device_batch``'s tensors: the longest ``prompt answer <eos>`` the parameters allow."""
    p = _check(task, split, profile, task_params)
    if task == "indirect_indexing":  # letters , src , sign digits , answer eos
        return p["max_len"] + len(str(p["max_shift"])) + 7
    if task == "flip_flop":
        return 2 * p["n_instr"] + 1
    if task == "selective_copy":
        return 2 * p["n_copy"] + _n_blank(p, split) + 2
    if task == "counting":  # the initial sets, every operation a set, print v value eos
        return 4 * p["n_vars"] + 4 * p["max_ops"] + 4
    return 3 * _operand_max(p, split) + 4  # a + b = c eos, c one digit longer than the longer operand


def device_batch(
    task: str,
    batch_size: int,
    *,
    generator: torch.Generator,
    device: torch.device | str | None = None,
    split: str = "train",
    profile: str = "cpu",
    **task_params,
) -> dict[str, torch.Tensor]:
    """``batch_size`` fresh examples of ``task``/``split`` on ``device`` (default: the generator's), drawn
    from ``generator``: ``{"input_ids", "attention_mask", "labels"}``, int64, ``(batch_size, max_length)``."""
    p = _check(task, split, profile, task_params)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: must be a positive integer")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    device = torch.device(device) if device is not None else generator.device
    if device.type != generator.device.type:
        raise ValueError(f"device={device} but the generator is on {generator.device}: draw on the generator's device")
    segments = _DRAW[task](_Draw(batch_size, generator, device), p, split, _ids(task))
    return _pack(segments, max_length(task, split, profile, **task_params))


class _Draw:
    """The batch size, generator and device every draw of one batch shares."""

    def __init__(self, n: int, generator: torch.Generator, device: torch.device):
        self.n, self.g, self.device = n, generator, device

    def randint(self, low: int, high: int, *shape: int) -> torch.Tensor:
        """Uniform integers in [low, high] (inclusive, as ``random.randint``)."""
        return torch.randint(low, high + 1, (self.n, *shape), generator=self.g, device=self.device)

    def rand(self, *shape: int) -> torch.Tensor:
        """Uniform float64 in [0, 1) (``random.random``'s resolution: no ties among a row's sort keys)."""
        return torch.rand((self.n, *shape), generator=self.g, device=self.device, dtype=torch.float64)

    def const(self, token: int) -> torch.Tensor:
        return torch.full((self.n, 1), token, dtype=torch.long, device=self.device)

    def arange(self, k: int) -> torch.Tensor:
        return torch.arange(k, device=self.device)

    def table(self, values) -> torch.Tensor:
        """A constant lookup tensor (token ids, widths), built once per device: no host-to-device copy after
        the first batch (a copy from host memory cannot be captured in a CUDA graph)."""
        return _table(tuple(tuple(v) if isinstance(v, list) else v for v in values), self.device)


@functools.lru_cache(maxsize=256)
def _table(values: tuple, device: torch.device) -> torch.Tensor:
    return torch.tensor(values, device=device)


def _segment(tokens: torch.Tensor, n_valid: torch.Tensor | None = None, labelled: bool | torch.Tensor = False):
    """(tokens, valid, labelled) of one piece of every row, ``(batch, k)``: its first ``n_valid`` columns are
    the row's tokens (all of them when None), ``labelled`` the columns scored."""
    k = tokens.shape[1]
    cols = torch.arange(k, device=tokens.device).expand_as(tokens)
    valid = cols < n_valid[:, None] if n_valid is not None else torch.ones_like(tokens, dtype=torch.bool)
    lab = labelled if isinstance(labelled, torch.Tensor) else torch.full_like(valid, labelled)
    return tokens, valid, lab


def _pack(segments: list, width: int) -> dict[str, torch.Tensor]:
    """The rows' valid tokens moved left (one scatter), right-padded to ``width``: encode_examples' layout."""
    tokens, valid, labelled = (torch.cat(parts, dim=1) for parts in zip(*segments, strict=True))
    n, device = tokens.shape[0], tokens.device
    pos = torch.where(valid, valid.long().cumsum(1) - 1, width)  # invalid columns land in a dropped column
    ids = torch.full((n, width + 1), PAD, dtype=torch.long, device=device).scatter_(1, pos, tokens)
    lab = torch.full((n, width + 1), IGNORE, dtype=torch.long, device=device)
    lab.scatter_(1, pos, torch.where(labelled & valid, tokens, IGNORE))
    mask = (torch.arange(width, device=device) < valid.sum(1, keepdim=True)).long()
    return {"input_ids": ids[:, :width], "attention_mask": mask, "labels": lab[:, :width]}


def _indirect_indexing(d: _Draw, p: dict, split: str, ids: dict) -> list:
    lo, hi, m = p["min_len"], p["max_len"], p["max_shift"]
    letters = d.table([ids[c] for c in gen.LETTERS])
    length = d.randint(lo, hi)
    string = letters[d.rand(len(gen.LETTERS)).argsort(1)[:, :hi]]  # a uniform draw without replacement
    src = (d.rand() * length).long().clamp(max=length - 1)
    shifts = torch.cat([d.arange(2 * m + 1)[:m] - m, d.arange(m + 1)[1:]])  # [-m, m] without 0
    target = src[:, None] + shifts
    allowed = (target >= 0) & (target < length[:, None])  # never empty: length >= 2
    shift = shifts[torch.where(allowed, d.rand(2 * m), -1.0).argmax(1)]  # uniform among the allowed shifts
    size = shift.abs()
    n_digits = 1 + sum((size >= 10**k).long() for k in range(1, len(str(m))))
    place = (n_digits[:, None] - 1 - d.arange(len(str(m)))).clamp(min=0)  # most significant digit first
    digits = d.table([ids[c] for c in "0123456789"])[(size[:, None] // 10**place) % 10]
    sign = torch.where(shift > 0, ids["+"], ids["-"])[:, None]
    comma = d.const(ids[","])
    return [
        _segment(string, length),
        _segment(torch.cat([comma, string.gather(1, src[:, None]), comma, sign], 1)),
        _segment(digits, n_digits),
        _segment(comma),
        _segment(torch.cat([string.gather(1, (src + shift)[:, None]), d.const(EOS)], 1), labelled=True),
    ]


def _flip_flop(d: _Draw, p: dict, split: str, ids: dict) -> list:
    n = p["n_instr"]
    p_i = {"ood_sparse": p["p_i_ood_sparse"], "ood_dense": p["p_i_ood_dense"]}.get(split, p["p_i"])
    u = d.rand(n)
    op = torch.where(u < p_i, ids["i"], torch.where(u < p_i + (1 - p_i) / 2, ids["w"], ids["r"]))
    op[:, 0], op[:, -1] = ids["w"], ids["r"]
    bit = d.table([ids["0"], ids["1"]])[d.randint(0, 1, n)]
    last_write = torch.where(op == ids["w"], d.arange(n), 0).cummax(1).values
    read = op == ids["r"]
    bit = torch.where(read, bit.gather(1, last_write), bit)  # every read's bit is the last written bit
    pairs = torch.stack([op, bit], 2).flatten(1)
    scored = torch.stack([torch.zeros_like(read), read], 2).flatten(1)  # every read's bit (the last: the answer)
    return [_segment(pairs, labelled=scored), _segment(d.const(EOS), labelled=True)]


def _n_blank(p: dict, split: str) -> int:
    return {
        "ood_dense": p["n_blank_ood_dense"] or p["n_blank"] // 2,
        "ood_sparse": p["n_blank_ood_sparse"] or p["n_blank"] * 2,
    }.get(split, p["n_blank"])


def _selective_copy(d: _Draw, p: dict, split: str, ids: dict) -> list:
    n_copy = p["n_copy"]
    total = n_copy + _n_blank(p, split)
    data = d.table([ids[c] for c in gen.COPY_DATA])[d.randint(0, len(gen.COPY_DATA) - 1, n_copy)]
    slots = d.rand(total).argsort(1)[:, :n_copy]  # a uniform n_copy-subset of the positions
    is_data = torch.zeros((d.n, total), dtype=torch.bool, device=d.device).scatter_(1, slots, True)
    k = (is_data.long().cumsum(1) - 1).clamp(min=0)  # the k-th data position holds the k-th data token
    seq = torch.where(is_data, data.gather(1, k), ids[gen.BLANK])
    return [
        _segment(torch.cat([seq, d.const(ids[gen.MARKER])], 1)),
        _segment(torch.cat([data, d.const(EOS)], 1), labelled=True),
    ]


def _w_pass(p: dict, split: str) -> float:
    return {"ood_long": p["w_pass_ood_long"], "ood_short": p["w_pass_ood_short"]}.get(split, p["w_pass"])


def _counting(d: _Draw, p: dict, split: str, ids: dict) -> list:
    """Each step's operation depends on its variable's value only through "at max_value or not", so a step
    is a map of the values 0..max_value; the values before every step are the maps' prefix compositions."""
    n_vars, steps, top = p["n_vars"], p["max_ops"], p["max_value"]
    w_set, w_incr, w_pass = p["w_set"], p["w_incr"], _w_pass(p, split)
    n_ops, var, u = d.randint(1, steps), d.randint(0, n_vars - 1, steps), d.rand(steps)
    SET, INCR, PASS = 0, 1, 2
    below = torch.where(u < w_set / (w_set + w_incr + w_pass), SET, INCR)  # random.choices' cumulative weights
    below = torch.where(u < (w_set + w_incr) / (w_set + w_incr + w_pass), below, PASS)
    at_top = torch.where(u < w_set / (w_set + w_pass), SET, PASS)  # an increment past max_value: redrawn
    values = d.arange(top + 1)
    op_of = torch.where(values < top, below[..., None], at_top[..., None])  # (batch, steps, value)
    moved = torch.where(op_of == SET, 0, torch.where(op_of == INCR, values + 1, values))
    chosen = (var[..., None] == d.arange(n_vars))[..., None]  # (batch, steps, var, 1)
    maps = torch.where(chosen, moved[:, :, None], values)  # the other variables keep their values
    span = 1
    while span < steps:  # Hillis-Steele: maps[t] becomes step t's map after those of steps t-2*span+1..t-1
        maps = torch.cat([maps[:, :span], maps[:, span:].gather(-1, maps[:, :-span])], 1)
        span *= 2
    after = maps[..., 0]  # every value starts at 0: (batch, steps, var) after each step
    before = torch.cat([torch.zeros_like(after[:, :1]), after[:, :-1]], 1).gather(2, var[..., None])[..., 0]
    op = op_of.gather(2, before[..., None])[..., 0]
    name = d.table([ids[v] for v in gen.VARIABLES[:n_vars]])
    eq, zero, semi, var_slot = ids["="], ids["0"], ids[";"], -1
    template = d.table(  # the tokens of set / incr / pass, the variable's slot -1
        [[var_slot, eq, zero, semi], [var_slot, ids["++"], semi, PAD], [ids["pass"], semi, PAD, PAD]]
    )[op]
    tokens = torch.where(template == var_slot, name[var][..., None], template)  # (batch, steps, 4)
    width = d.table([4, 3, 2])[op]
    width = torch.where(d.arange(steps) < n_ops[:, None], width, 0)  # the steps past n_ops are not drawn
    valid = (d.arange(4) < width[..., None]).flatten(1)
    order = name[d.rand(n_vars).argsort(1)]  # the initial sets, in a random order
    init = torch.stack([order, *[torch.full_like(order, t) for t in (eq, zero, semi)]], -1).flatten(1)
    target = d.randint(0, n_vars - 1)
    final = after.gather(1, (n_ops - 1)[:, None, None].expand(-1, 1, n_vars))[:, 0].gather(1, target[:, None])
    answer = d.table([ids[str(k)] for k in range(top + 1)])[final]
    return [
        _segment(init),
        (tokens.flatten(1), valid, torch.zeros_like(valid)),
        _segment(torch.cat([d.const(ids["print"]), name[target][:, None]], 1)),
        _segment(torch.cat([answer, d.const(EOS)], 1), labelled=True),
    ]


def _operand_max(p: dict, split: str) -> int:
    return 2 * p["n_max"] if split == "test" else p["n_max"]


def _addition(d: _Draw, p: dict, split: str, ids: dict) -> list:
    top = _operand_max(p, split)
    if split == "train":
        len_a, len_b = d.randint(1, top), d.randint(1, top)
    else:  # val / test: row i is cell i mod cells of [1, top]^2, in the reference's order
        cell = d.arange(d.n) % (top * top)
        len_a, len_b = cell // top + 1, cell % top + 1
    cols = d.arange(top + 1)

    def operand(length: torch.Tensor) -> torch.Tensor:
        """Digits, least significant first, of a uniform ``length``-digit number, zero past its length
        (uniform over [10^(len-1), 10^len - 1] = a uniform leading digit 1-9 and uniform others; 0-9 alone)."""
        digits = d.randint(0, 9, top + 1)
        lead = cols == (length - 1)[:, None]
        digits = torch.where(lead & (length[:, None] > 1), d.randint(1, 9)[:, None], digits)
        return torch.where(cols < length[:, None], digits, 0)

    a, b = operand(len_a), operand(len_b)
    total = a + b
    # the carry out of column i: that of the last column j <= i whose sum is not 9 (a 9 passes its carry on)
    decides = torch.where(total != 9, cols, -1).cummax(1).values
    carry_out = (total.gather(1, decides.clamp(min=0)) >= 10) & (decides >= 0)
    carry_in = torch.cat([torch.zeros_like(carry_out[:, :1]), carry_out[:, :-1]], 1)
    sum_digits = (total + carry_in) % 10
    longer = torch.maximum(len_a, len_b)
    len_c = longer + carry_out.gather(1, (longer - 1)[:, None])[:, 0].long()
    digit = d.table([ids[c] for c in "0123456789"])
    return [
        _segment(digit[a[:, :top]], len_a),
        _segment(d.const(ids["+"])),
        _segment(digit[b[:, :top]], len_b),
        _segment(d.const(ids["="])),
        _segment(digit[sum_digits], len_c, labelled=True),
        _segment(d.const(EOS), labelled=True),
    ]


_DRAW = {
    "indirect_indexing": _indirect_indexing,
    "flip_flop": _flip_flop,
    "selective_copy": _selective_copy,
    "counting": _counting,
    "addition": _addition,
}
