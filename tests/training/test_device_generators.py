"""Issue 64: the vectorised torch generators (peeval.training.device_generators) against the Python reference
(peeval.tasks.diagnostics.generators). Format: every drawn row decodes to prompt / answer strings whose answer
this file recomputes from the prompt by the task's definition, and whose encoding by ``encode_examples`` is the
batch itself. Distribution: every statistic the task's definition fixes, read from the decoded strings of
2,000 rows of each generator (fixed seeds), compared by a chi-square test of homogeneity (categories) or a
two-sample KS test (counts), rejected below p = 1e-4; ``test_the_comparison_rejects_a_nearby_distribution``
shows the same comparisons reject a distribution one parameter away."""

import string
from collections import Counter

import pytest
import torch
from scipy.stats import chi2_contingency, ks_2samp

from peeval.tasks.diagnostics import generators as gen
from peeval.training.device_generators import device_batch, max_length
from peeval.training.diagnostics import encode_examples

N = 2000
P_MIN = 1e-4
LETTERS = string.ascii_uppercase + string.ascii_lowercase


def device_rows(task, split, n, seed=0, **params):
    """The batch decoded to reference-style rows (the answer: the labelled tokens before <eos>, after the
    last unlabelled one), and the batch."""
    tok = gen.tokenizer(task)
    batch = device_batch(task, n, generator=torch.Generator().manual_seed(seed), split=split, **params)
    rows = []
    for ids, mask, labels in zip(batch["input_ids"], batch["attention_mask"], batch["labels"], strict=True):
        k = int(mask.sum())
        assert mask[:k].all() and not mask[k:].any(), "the mask is not a prefix"
        syms = tok.convert_ids_to_tokens(ids[:k].tolist())
        assert syms[-1] == "<eos>" and "<pad>" not in syms and "<unk>" not in syms, syms
        scored = (labels[: k - 1] != -100).tolist()
        start = k - 1
        while start > 0 and scored[start - 1]:
            start -= 1
        rows.append({"prompt": " ".join(syms[:start]), "answer": " ".join(syms[start : k - 1])})
    return rows, batch


SPLITS = [(t, s) for t in gen.TASKS for s in [*gen.splits(t), gen.VAL_SPLIT]]


# ---- format: the answer recomputed from the prompt, by the task's definition ----


def answer_indirect_indexing(prompt, p, split):
    toks = prompt.split()
    cut = toks.index(",")
    letters, (src, c1, sign, *digits, c2) = toks[:cut], toks[cut + 1 :]
    assert (c1, c2) == (",", ",") and sign in "+-" and len(set(letters)) == len(letters)
    assert set(letters) <= set(LETTERS) and p["min_len"] <= len(letters) <= p["max_len"]
    assert digits[0] != "0" or len(digits) == 1
    shift = int("".join(digits)) * (1 if sign == "+" else -1)
    assert shift != 0 and abs(shift) <= p["max_shift"]
    return letters[letters.index(src) + shift]


def answer_flip_flop(prompt, p, split):
    toks = prompt.split() + ["?"]
    ops, bits = toks[0::2], toks[1::2]
    assert len(ops) == p["n_instr"] and ops[0] == "w" and ops[-1] == "r" and set(ops) <= set("wir")
    memory = None
    for op, bit in zip(ops, bits, strict=True):
        assert bit in "01" or bit == "?"
        if op == "w":
            memory = bit
        elif op == "r" and bit != "?":
            assert bit == memory, "a read's bit is not the last written bit"
    return memory


def n_blank(p, split):
    return {"ood_dense": p["n_blank"] // 2, "ood_sparse": p["n_blank"] * 2}.get(split, p["n_blank"])


def answer_selective_copy(prompt, p, split):
    *seq, marker = prompt.split()
    assert marker == "=" and len(seq) == p["n_copy"] + n_blank(p, split)
    data = [t for t in seq if t != "."]
    assert len(data) == p["n_copy"] and set(data) <= set("ABCDEFGHIJKLMN")
    return " ".join(data)


def run_counting(prompt, p):
    """(answer, operations, target): the program interpreted (a variable at max_value is never incremented;
    a ``pass`` names no variable, so the redraw's set/pass split shows only in the kinds and the answers)."""
    toks = prompt.split()
    assert toks[-2] == "print"
    names = gen.VARIABLES[: p["n_vars"]]
    init = [toks[4 * k : 4 * k + 4] for k in range(len(names))]
    assert sorted(s[0] for s in init) == list(names) and all(s[1:] == ["=", "0", ";"] for s in init)
    values, ops, i = dict.fromkeys(names, 0), [], 4 * len(names)
    body = toks[:-2]
    while i < len(body):
        if body[i] == "pass":
            kind, i = "pass", i + 2
            assert body[i - 1] == ";"
            ops.append(kind)
            continue
        v = body[i]
        if body[i + 1] == "++":
            assert body[i + 2] == ";" and values[v] < p["max_value"], "an increment past max_value"
            kind, i = "incr", i + 3
            values[v] += 1
        else:
            assert body[i + 1 : i + 4] == ["=", "0", ";"]
            kind, i = "set", i + 4
            values[v] = 0
        ops.append(kind)
    assert 1 <= len(ops) <= p["max_ops"]
    return str(values[toks[-1]]), ops, toks[-1]


def answer_counting(prompt, p, split):
    return run_counting(prompt, p)[0]


def parse_addition(prompt):
    toks = prompt.split()
    plus, eq = toks.index("+"), toks.index("=")
    assert eq == len(toks) - 1
    a, b = toks[:plus], toks[plus + 1 : eq]
    for x in (a, b):  # least significant first: no leading zero at the end
        assert x and set(x) <= set(string.digits) and (x[-1] != "0" or len(x) == 1)
    return a, b


def answer_addition(prompt, p, split):
    a, b = parse_addition(prompt)
    top = 2 * p["n_max"] if split == "test" else p["n_max"]
    assert len(a) <= top and len(b) <= top
    return " ".join(str(int("".join(a[::-1])) + int("".join(b[::-1])))[::-1])


ANSWER = {
    "indirect_indexing": answer_indirect_indexing,
    "flip_flop": answer_flip_flop,
    "selective_copy": answer_selective_copy,
    "counting": answer_counting,
    "addition": answer_addition,
}


@pytest.mark.parametrize("profile", ["cpu", "paper"])
@pytest.mark.parametrize(("task", "split"), SPLITS)
def test_every_row_is_a_task_example_with_the_right_answer_in_encode_examples_format(task, split, profile):
    n = 200 if profile == "cpu" else 24
    p = gen.params(task, profile)
    rows, batch = device_rows(task, split, n, seed=1, profile=profile)
    for r in rows:
        assert r["answer"] == ANSWER[task](r["prompt"], p, split), r
    assert batch["input_ids"].shape == (n, max_length(task, split, profile))
    want = encode_examples(rows, gen.tokenizer(task), task)  # the reference encoder: ids, mask, labels
    width = want["input_ids"].shape[1]
    for key, ref in want.items():
        assert batch[key].dtype == ref.dtype and torch.equal(batch[key][:, :width], ref), key
    assert (batch["attention_mask"][:, width:] == 0).all()


def test_the_width_is_the_longest_example_the_parameters_allow():
    """max_length is reached: a counting program of only sets, a 2-digit shift at max_len, a carry out of
    both longest operands (parameters where such rows are likely)."""
    for task, split, params, n in [
        ("counting", "train", {"max_ops": 2, "w_pass": 0, "w_incr": 0}, 50),
        ("indirect_indexing", "train", {"min_len": 40}, 400),
        ("addition", "train", {"n_max": 1}, 400),
        ("addition", "test", {"n_max": 1}, 40),
    ]:
        _, b = device_rows(task, split, n, **params)
        assert int(b["attention_mask"].sum(1).max()) == max_length(task, split, **params) == b["input_ids"].shape[1]


def test_addition_val_and_test_rows_follow_the_reference_cell_order():
    for split, top in (("val", 4), ("test", 8)):
        rows, _ = device_rows("addition", split, 3 * top * top)
        ref = gen.generate("addition", split, top * top, seed=0)
        for i, r in enumerate(rows):
            a, b = parse_addition(r["prompt"])
            m = ref[i % len(ref)]["meta"]
            assert (len(a), len(b)) == (m["len_a"], m["len_b"]), (split, i)


# ---- distribution: every statistic the task's definition fixes, reference vs device ----


def stats_indirect_indexing(rows, p):
    out = {"length": [], "source position": [], "source from the end": [], "shift": [], "letter": []}
    out["answer position"] = []
    for r in rows:
        toks = r["prompt"].split()
        letters = toks[: toks.index(",")]
        src = letters.index(toks[len(letters) + 1])
        out["length"].append(len(letters))
        out["source position"].append(src)
        out["source from the end"].append(len(letters) - 1 - src)
        out["shift"].append(letters.index(r["answer"]) - src)
        out["letter"] += letters
        out["answer position"].append(letters.index(r["answer"]))
    return {k: ("chi2", v) for k, v in out.items()}


def stats_flip_flop(rows, p):
    ops, written, reads, gap = [], [], [], []
    for r in rows:
        toks = r["prompt"].split()
        o = toks[0::2]
        ops += o[1:-1]  # the first (w) and last (r) are fixed
        written += [b for op, b in zip(o, toks[1::2], strict=False) if op != "r"]
        reads.append(o.count("r"))
        gap.append(len(o) - 1 - max(i for i, op in enumerate(o) if op == "w"))
    answers = [r["answer"] for r in rows]
    return {
        "instruction": ("chi2", ops),
        "written or ignored bit": ("chi2", written),
        "reads per example": ("ks", reads),
        "final read's distance to its write": ("ks", gap),
        "answer bit": ("chi2", answers),
    }


def stats_selective_copy(rows, p):
    data, positions, first, gaps = [], [], [], []
    for r in rows:
        seq = r["prompt"].split()[:-1]
        pos = [i for i, t in enumerate(seq) if t != "."]
        data += [seq[i] for i in pos]
        positions += pos
        first.append(pos[0])
        gaps += [b - a for a, b in zip(pos, pos[1:], strict=False)]
    return {
        "data token": ("chi2", data),
        "data position": ("chi2", positions),
        "first data position": ("ks", first),
        "gap between data tokens": ("ks", gaps),
    }


def stats_counting(rows, p):
    out = {"operations": [], "kind": [], "answer": [], "target": [], "first set": []}
    out["length"] = []
    for r in rows:
        answer, ops, target = run_counting(r["prompt"], p)
        out["operations"].append(len(ops))
        out["kind"] += ops
        out["answer"].append(answer)
        out["target"].append(target)
        out["first set"].append(r["prompt"].split()[0])
        out["length"].append(len(r["prompt"].split()))
    return {k: ("ks" if k == "length" else "chi2", v) for k, v in out.items()}


def stats_addition(rows, p):
    out = {"len_a": [], "len_b": [], "carry out": [], "carries per example": [], "carry per column": []}
    out["leading digit"], out["digit"] = [], []
    for r in rows:
        a, b = parse_addition(r["prompt"])
        out["len_a"].append(len(a))
        out["len_b"].append(len(b))
        out["carry out"].append(len(r["answer"].split()) > max(len(a), len(b)))
        carry, n = 0, 0
        for i in range(max(len(a), len(b))):
            s = sum(int(x[i]) for x in (a, b) if i < len(x)) + carry
            carry = s >= 10
            n += carry
            out["carry per column"].append(carry)
        out["carries per example"].append(n)
        out["leading digit"] += [(len(x) > 1, x[-1]) for x in (a, b)]
        out["digit"] += a[:-1] + b[:-1]
    return {k: ("ks" if k == "carries per example" else "chi2", v) for k, v in out.items()}


STATS = {
    "indirect_indexing": stats_indirect_indexing,
    "flip_flop": stats_flip_flop,
    "selective_copy": stats_selective_copy,
    "counting": stats_counting,
    "addition": stats_addition,
}


def homogeneity_p(kind, a, b):
    """p of "a and b come from one distribution": two-sample KS, or chi-square on the categories (those with
    fewer than 10 draws in all pooled; 0 where one side never draws a value the other draws 20 times, e.g. an
    off-by-one at a range's end that a chi-square over many categories would dilute)."""
    if kind == "ks":
        return ks_2samp(a, b).pvalue
    ca, cb = Counter(a), Counter(b)
    cats = sorted(set(ca) | set(cb), key=str)
    if any(min(ca[c], cb[c]) == 0 and max(ca[c], cb[c]) >= 20 for c in cats):
        return 0.0  # a value drawn 20 times on one side and never on the other: a different support
    rare = [c for c in cats if ca[c] + cb[c] < 10]
    table = [[ca[c] for c in cats if c not in rare], [cb[c] for c in cats if c not in rare]]
    if rare:
        table[0].append(sum(ca[c] for c in rare))
        table[1].append(sum(cb[c] for c in rare))
    if len(table[0]) < 2:  # one category (or none): nothing to compare
        return 1.0
    return chi2_contingency(table).pvalue


def compare(task, split, ref_params, dev_params):
    """{statistic: p} for the reference under ref_params against the device generator under dev_params."""
    ref = gen.generate(task, split, N, seed=7, **ref_params)
    dev, _ = device_rows(task, split, N, seed=7, **dev_params)
    got_ref, got_dev = (
        STATS[task](ref, gen.params(task, **ref_params)),
        STATS[task](dev, gen.params(task, **dev_params)),
    )
    assert got_ref.keys() == got_dev.keys()
    return {k: homogeneity_p(kind, got_ref[k][1], got_dev[k][1]) for k, (kind, _) in got_ref.items()}


DIST = [
    *[(t, s, {}) for t, s in SPLITS if not (t == "addition" and s != "train")],
    ("counting", "train", {"n_vars": 3}),
    ("counting", "ood_short", {"n_vars": 5}),
    ("counting", "train", {"max_value": 3, "w_pass": 5}),  # variables at max_value often: the redraw
]


@pytest.mark.parametrize(("task", "split", "params"), DIST)
def test_every_statistic_matches_the_reference_generator(task, split, params):
    ps = compare(task, split, params, params)
    bad = {k: p for k, p in ps.items() if p < P_MIN}
    assert not bad, f"{task}/{split}: statistics differ from the reference (p < {P_MIN}): {bad}"


@pytest.mark.parametrize(
    ("task", "split", "ref", "dev", "statistic"),
    [
        ("flip_flop", "train", {"p_i": 0.75}, {}, "instruction"),
        ("flip_flop", "ood_sparse", {"p_i_ood_sparse": 0.96}, {}, "instruction"),
        ("selective_copy", "train", {"n_blank": 18}, {}, "gap between data tokens"),
        ("counting", "train", {"w_pass": 40}, {}, "kind"),
        ("counting", "train", {"max_value": 9}, {}, "answer"),
        ("indirect_indexing", "train", {"max_shift": 12}, {}, "shift"),
        ("addition", "train", {"n_max": 5}, {}, "len_a"),
    ],
)
def test_the_comparison_rejects_a_nearby_distribution(task, split, ref, dev, statistic):
    """The power check: one parameter moved a little on the reference side is caught by the statistic it moves."""
    assert compare(task, split, ref, dev)[statistic] < P_MIN


# ---- the entry point's contract ----


def test_the_same_generator_state_gives_the_same_batch_and_another_seed_another():
    def draw(seed):
        return device_batch("counting", 8, generator=torch.Generator().manual_seed(seed), n_vars=3)

    a, b, c = draw(3), draw(3), draw(4)
    assert all(torch.equal(a[k], b[k]) for k in a) and not torch.equal(a["input_ids"], c["input_ids"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task": "sorting"}, "unknown diagnostic task 'sorting'"),
        ({"split": "ood_long"}, "split='ood_long' is not a split of diagnostic 'flip_flop'"),
        ({"n_instr": 1}, "flip_flop parameter n_instr=1: must be at least 2"),
        ({"p_i": 1.5}, "flip_flop parameter p_i=1.5: must be a probability"),
        ({"depth": 3}, "unknown parameter(s) ['depth'] for diagnostic 'flip_flop'"),
        ({"batch_size": 0}, "batch_size=0: must be a positive integer"),
        ({"batch_size": 2.0}, "batch_size=2.0: must be a positive integer"),
        ({"generator": 0}, "generator must be a torch.Generator"),
        ({"device": "meta"}, "device=meta but the generator is on cpu"),
        ({"task": "counting", "n_vars": 6}, "counting parameter n_vars=6: must be in [1, 5]"),
        ({"task": "counting", "w_set": 0, "w_pass": 0}, "counting parameter w_set=0"),
        (
            {"task": "indirect_indexing", "max_len": 60},
            "indirect_indexing parameter max_len=60: must be in [min_len, 52]",
        ),
        ({"task": "addition", "profile": "gpu"}, "unknown diagnostics profile 'gpu'"),
    ],
)
def test_every_bad_input_is_refused_with_one_line_naming_it(kwargs, message):
    args = {"task": "flip_flop", "batch_size": 2, "generator": torch.Generator(), **kwargs}
    with pytest.raises(ValueError) as err:
        device_batch(args.pop("task"), args.pop("batch_size"), **args)
    assert message in str(err.value) and "\n" not in str(err.value)
