"""Issue 30, item 3: passkey lengths mean the evaluated model's tokens, and a prompt that would be
left-truncated (its pass key cut off, accuracy 0 with a warning) is an error naming the length and
max_length. Before, lengths were GPT-2 tokens unless a ``tokenizer`` key (documented in a docstring
only) was given: a 512-token cell was a 690-token prompt for the model."""

import json

import pytest
from helpers.checkpoints import save_tiny_checkpoint

from peeval.tasks.passkey.passkey import FILLER, INTRO, NEEDLE, QUESTION


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A tokenizer far from GPT-2's: the same prompt is many more of its tokens."""
    corpus = [INTRO, NEEDLE.format(key=12345), QUESTION, "0123456789"]  # no filler: it splits into small pieces
    return save_tiny_checkpoint(tmp_path_factory.mktemp("pk") / "tape", corpus, pe="tape", vocab_size=300,
                                max_positions=64, byte_decoder=True)  # fmt: skip


def _prompts(metadata: dict) -> list[dict]:
    from lm_eval.tasks import TaskManager, get_task_dict

    import peeval

    tasks_dir = str(__import__("pathlib").Path(peeval.__file__).parent / "tasks")
    tm = TaskManager(include_path=[tasks_dir], include_defaults=False, metadata=metadata)
    return list(get_task_dict(["peeval_passkey"], tm)["peeval_passkey"].test_docs())


@pytest.mark.parametrize("how", ["pretrained", "tokenizer"])
def test_lengths_count_the_evaluated_models_tokens(ckpt, how):
    """Plain lm_eval hands the model's ``pretrained`` to every task (merged --model_args)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ckpt)
    per_filler = len(tok(" " + FILLER, add_special_tokens=False)["input_ids"])
    docs = _prompts({"lengths": [200, 400], "depths": [0.0, 1.0], "per_cell": 1, how: str(ckpt)})
    assert len(docs) == 4
    for d in docs:
        n = len(tok(d["prompt"], add_special_tokens=False)["input_ids"])
        assert d["length"] - per_filler - 2 <= n <= d["length"], (d["length"], n)


def test_peeval_eval_counts_in_the_models_tokens_and_refuses_truncation(ckpt, tmp_path, capsys):
    from transformers import AutoTokenizer

    from peeval.cli import main

    md = {"lengths": [400], "depths": [0.5], "per_cell": 1}
    base = ["eval", "--model", "peeval", "--tasks", "peeval_passkey", "--device", "cpu", "--metadata",
            json.dumps(md), "--output_path", str(tmp_path / "out")]  # fmt: skip
    rc = main([*base, "--model_args", f"pretrained={ckpt},max_length=300"])
    err = capsys.readouterr().err
    lines = [li for li in err.splitlines() if li.startswith("peeval eval: error: ")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert "length-400" in lines[0] and "max_length=300" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()

    assert main([*base, "--model_args", f"pretrained={ckpt}"]) == 0, capsys.readouterr().err[-2000:]
    (sample,) = (tmp_path / "out").glob("*/samples_peeval_passkey.jsonl")
    prompt = json.loads(sample.read_text().splitlines()[0])["arguments"][0][0]
    tok = AutoTokenizer.from_pretrained(ckpt)
    n, per_filler = (len(tok(s, add_special_tokens=False)["input_ids"]) for s in (prompt, " " + FILLER))
    assert 400 - per_filler - 2 <= n <= 400, n  # a 400-token cell is about 400 tokens of this model


def test_limit_applies_per_length(ckpt):
    """Issue 68 item 6: `lm_eval ... --limit 2` on peeval_passkey scored two depths of the first length and skipped the
    second length silently. A limit now keeps that many prompts of every length (whole rounds of the grid)."""
    from collections import Counter

    from lm_eval.tasks import TaskManager, get_task_dict

    import peeval

    tasks_dir = str(__import__("pathlib").Path(peeval.__file__).parent / "tasks")
    md = {"lengths": [40, 60], "depths": [0.0, 0.5, 1.0], "per_cell": 3, "tokenizer": str(ckpt)}
    tm = TaskManager(include_path=[tasks_dir], include_defaults=False, metadata=md)
    task = get_task_dict(["peeval_passkey"], tm)["peeval_passkey"]
    for limit, per_length in ((2, 3), (1, 3), (4, 6), (100, 9)):
        docs = [d for _, d in task.doc_iterator(limit=limit)]
        lengths = Counter(d["length"] for d in docs)
        assert lengths == {40: per_length, 60: per_length}, (limit, lengths)
        cells = Counter((d["length"], d["depth"]) for d in docs)
        assert len(set(cells.values())) == 1, (limit, cells)  # every cell as many prompts
