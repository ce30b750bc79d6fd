"""lm-eval's own YAML tasks through the offline mirror: they load from ``<mirror>/hf/<id>`` with
their own prompts; a dataset in no mirror and off the hub is one clear error; and hellaswag
(not mirrored) read from a hub-schema fixture gives the same requests as lm-eval builds when
the hub serves that data."""

from pathlib import Path

import pytest
from helpers.data_mirror import needs_mirror
from helpers.mirrors import write_hub_layout


@pytest.fixture(autouse=True)
def offline(hub_offline):
    from peeval.data import patch_lm_eval_tasks

    patch_lm_eval_tasks()


def _task(name: str, folder: str, metadata=None):
    import lm_eval.tasks
    from lm_eval.tasks import TaskManager

    root = Path(lm_eval.tasks.__file__).parent / folder
    tm = TaskManager(include_path=[str(root)], include_defaults=False, metadata=metadata)
    return tm.load_task_or_group([name])[name]


def _requests(task, limit: int) -> list:
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    return [inst.arguments for inst in sorted(task.instances, key=lambda i: (i.doc_id, i.idx))]


@needs_mirror("hf", "allenai", "ai2_arc")
def test_builtin_tasks_load_from_the_mirror(monkeypatch, data_mirror):
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(data_mirror))
    arc = _task("arc_easy", "arc")
    assert len(arc.test_docs()) == 2376 and len(arc.training_docs()) == 2251  # the mirror README's counts
    doc = arc.test_docs()[0]
    assert arc.doc_to_text(doc).startswith("Question: ") and arc.doc_to_text(doc).endswith("\nAnswer:")
    lam = _task("lambada_openai", "lambada")
    assert len(lam.test_docs()) == 5153
    req = _requests(lam, 1)[0]
    text = lam.test_docs()[0]["text"]
    assert req == (text.rsplit(" ", 1)[0], " " + text.rsplit(" ", 1)[1])  # lm-eval's own prompt
    mmlu = _task("mmlu_anatomy", "mmlu/default")
    assert len(mmlu.test_docs()) == 135


def test_hellaswag_from_a_mirror_gives_the_hub_requests(tmp_path, monkeypatch):
    dd = write_hub_layout(tmp_path)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    mirrored = _requests(_task("hellaswag", "hellaswag"), 3)

    # the hub path: lm-eval's own download, with datasets.load_dataset serving the same rows for the hub id
    import lm_eval.api.task as api_task

    real = api_task.datasets.load_dataset
    seen = []

    def hub(path, name=None, **kw):
        seen.append(path)
        assert path == "Rowan/hellaswag"
        return dd

    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "empty"))
    monkeypatch.setattr(api_task.datasets, "load_dataset", hub)
    from_hub = _requests(_task("hellaswag", "hellaswag"), 3)
    monkeypatch.setattr(api_task.datasets, "load_dataset", real)
    assert seen == ["Rowan/hellaswag"]
    assert len(mirrored) == 12 and mirrored == from_hub  # 3 docs x 4 endings
    # lm-eval's preprocessing ran on the mirrored rows ("[title]" -> ". ", brackets removed)
    assert mirrored[4][0] == "Baking cookies: A woman pours flour into a bowl.. She She"
    assert mirrored[5][1] == " bakes it."


def test_missing_dataset_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"dataset 'Rowan/hellaswag' is neither in the mirror .* nor reachable"):
        _task("hellaswag", "hellaswag")


@needs_mirror("hf", "tau", "scrolls")
def test_partial_mirror_config_is_not_taken_for_the_dataset(monkeypatch, data_mirror):
    from peeval.data import load_dataset, mirror_path

    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(data_mirror))
    assert mirror_path("tau/scrolls", "qmsum") == data_mirror / "hf" / "tau" / "scrolls"
    assert mirror_path("tau/scrolls", "qasper") is None
    with pytest.raises(FileNotFoundError, match=r"'tau/scrolls' \(qasper\)"):
        load_dataset("tau/scrolls", "qasper", split="validation")


def test_import_hook_routes_builtin_tasks_through_the_mirror():
    """The hook's source (as a fresh install ships it) patches lm-eval's task class on import."""
    import subprocess
    import sys

    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_PostImportFinder'];"
        "sys.__dict__.pop('_peeval_lm_eval_hook_installed', None);"
        "import peeval.evaluation.lm_eval_hook; import lm_eval.api.task as t;"
        "print(getattr(t.ConfigurableTask.download, '_peeval_mirror', False))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "True", r.stderr[-2000:]
