"""Issue 30, item 4: every task metadata key is known. A misspelt key (``lenghts``) used to be
ignored and the task's defaults scored with exit 0; now every peeval task refuses it in one line
naming the key and the closest one it reads (exit 2, nothing written), while the model arguments
plain lm_eval merges into the metadata still pass."""

import json
from pathlib import Path

import pytest
import yaml
from helpers.checkpoints import save_tiny_checkpoint

import peeval

TASKS_DIR = Path(peeval.__file__).parent / "tasks"


def _loader():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # !function: not needed here
    return Loader


def peeval_tasks() -> dict[str, dict]:
    """Every task YAML in the package (groups excluded): name -> its YAML metadata."""
    out = {}
    for f in sorted(TASKS_DIR.rglob("*.yaml")):
        doc = yaml.load(f.read_text(), Loader=_loader()) or {}
        if isinstance(doc.get("task"), str) and "group" not in doc:
            out[doc["task"]] = doc.get("metadata") or {}
    return out


def _misspelt(task: str) -> tuple[str, str | None]:
    if task.startswith(("peeval_ppl", "peeval_passkey")):
        return "lenghts", "lengths"
    if task.startswith("peeval_diag"):
        return "sed", "seed"
    if task.startswith("peeval_scrolls"):
        return "scroll_task", "scrolls_task"
    return "lenghts", None  # cbt, hellaswag: read no key of their own


def test_every_task_is_covered():
    names = set(peeval_tasks())
    assert len(names) >= 20 and {"peeval_ppl_pg19", "peeval_passkey", "peeval_hellaswag", "peeval_cbt_cn"} <= names


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("md") / "rope", ["the cat sat on the mat 0123456789"],
                                pe="rope", vocab_size=300, max_positions=64)  # fmt: skip


@pytest.mark.parametrize("task", sorted(peeval_tasks()))
def test_misspelt_metadata_key_is_one_line_and_exit_2(task, ckpt, tmp_path, capsys):
    from peeval.cli import main

    bad, meant = _misspelt(task)
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ckpt}", "--tasks", task, "--device", "cpu",
            "--metadata", json.dumps({bad: [64]}), "--output_path", str(tmp_path / "out")]  # fmt: skip
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [li for li in err.splitlines() if li.startswith("peeval eval: error: ")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert f"unknown key {bad!r}" in lines[0] and task.split("_")[1] in lines[0], lines[0]
    if meant:
        assert f"did you mean {meant!r}" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("task", sorted(peeval_tasks()))
def test_the_task_itself_refuses_a_misspelt_key(task):
    """Plain lm_eval (no peeval CLI in front): the task refuses the key when lm-eval builds it."""
    from lm_eval.tasks import TaskManager, get_task_dict

    bad, meant = _misspelt(task)
    tm = TaskManager(include_path=[str(TASKS_DIR)], include_defaults=False, metadata={bad: [64]})
    with pytest.raises(ValueError, match=f"unknown key {bad!r}") as e:
        get_task_dict([task], tm)
    assert meant is None or f"did you mean {meant!r}" in str(e.value)


def test_model_args_merged_by_plain_lm_eval_are_not_task_keys():
    """Plain ``lm_eval`` merges --model_args into every task's metadata (lm_eval/config/evaluate_config.py),
    and one --metadata serves every task of a run (ppl and passkey keys side by side)."""
    from peeval.tasks.metadata_keys import check_keys

    md = {"version": 1.0, "lengths": [64], "depths": [0.5], "max_docs": 1, "pretrained": "x", "max_length": 128,
          "gguf_file": "f.gguf", "rope_scaling": "yarn", "factor": 2, "dtype": "float32", "batch_size": 1}  # fmt: skip
    check_keys("peeval_ppl_pg19", md)
    check_keys("peeval_passkey", md)
    with pytest.raises(ValueError, match=r"unknown key 'lenghts' \(did you mean 'lengths'\?\)"):
        check_keys("peeval_ppl_pg19", {**md, "lenghts": [1]})


def test_peeval_eval_wants_each_key_read_by_a_task_it_runs():
    from peeval.tasks.metadata_keys import check_requested

    check_requested(["peeval_ppl_pg19", "peeval_passkey"], {"lengths": [64], "depths": [0.5], "max_docs": 1})
    with pytest.raises(ValueError, match=r"--metadata: unknown key 'depths'.*peeval_ppl_pg19 read"):
        check_requested(["peeval_ppl_pg19"], {"lengths": [64], "depths": [0.5]})
    check_requested(["peeval_ppl_pg19", "hellaswag"], {"anything": 1})  # another lm-eval task: its own keys
