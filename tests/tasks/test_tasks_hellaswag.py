"""peeval_hellaswag: lm-eval's own HellaSwag (prompts, preprocessing, metrics) without the train split
that lm-eval's YAML builds even at 0-shot, so it runs on the offline mirror (validation split only)."""

from pathlib import Path

import pytest
from conftest import REPO
from helpers.data_mirror import needs_mirror
from helpers.mirrors import write_hub_layout

PEEVAL_HELLASWAG = Path(REPO) / "peeval" / "tasks" / "hellaswag"


@pytest.fixture(autouse=True)
def offline(hub_offline, tmp_path, monkeypatch):
    """Offline, and a datasets cache of this test's own: `datasets` caches a local folder's dataset
    by its name, so the 3-row fake mirrors below would otherwise be what the real mirror's test reads."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))
    from peeval.data import patch_lm_eval_tasks

    patch_lm_eval_tasks()


def _task(name: str):
    import lm_eval.tasks
    from lm_eval.tasks import TaskManager

    folder = PEEVAL_HELLASWAG if name.startswith("peeval_") else Path(lm_eval.tasks.__file__).parent / "hellaswag"
    tm = TaskManager(include_path=[str(folder)], include_defaults=False)
    return tm.load_task_or_group([name])[name]


def _requests(task, limit: int) -> list:
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    return [inst.arguments for inst in sorted(task.instances, key=lambda i: (i.doc_id, i.idx))]


def test_same_requests_as_lm_evals_hellaswag(tmp_path, monkeypatch):
    """On a mirror that has the train split too, both tasks give the same (context, ending) requests."""
    write_hub_layout(tmp_path)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    ours, theirs = _requests(_task("peeval_hellaswag"), 3), _requests(_task("hellaswag"), 3)
    assert len(ours) == 12 and ours == theirs  # 3 docs x 4 endings
    # lm-eval's preprocessing ran ("[title]" -> ". ", brackets removed); written out by hand
    assert ours[4] == ("Baking cookies: A woman pours flour into a bowl.. She She", " stirs slowly.")
    task = _task("peeval_hellaswag")
    assert not task.has_training_docs() and task.has_validation_docs()
    assert [m["metric"] for m in task.config.metric_list] == ["acc", "acc_norm"]


def test_runs_without_a_train_split(tmp_path, monkeypatch):
    """A mirror with the validation split only: lm-eval's hellaswag fails on the missing train split
    (why the peeval task exists), peeval_hellaswag builds its requests."""
    import datasets

    folder = tmp_path / "hf" / "Rowan" / "hellaswag"
    dd = write_hub_layout(tmp_path)
    (folder / "data" / "train-00000-of-00001.parquet").unlink()
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n"
        "  - split: validation\n    path: data/validation-*\n---\n"
    )
    assert isinstance(dd["validation"], datasets.Dataset)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    with pytest.raises(KeyError, match="train"):
        _requests(_task("hellaswag"), 2)
    reqs = _requests(_task("peeval_hellaswag"), 2)
    assert len(reqs) == 8 and reqs[0][1] == " the man adds wax."


@needs_mirror("hf", "Rowan", "hellaswag")
def test_the_mirrors_validation_split(monkeypatch, data_mirror):
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(data_mirror))
    task = _task("peeval_hellaswag")
    assert len(task.validation_docs()) == 10042  # the mirror README's count
    reqs = _requests(task, 1)
    assert len(reqs) == 4 and all(ctx == reqs[0][0] for ctx, _ in reqs)
