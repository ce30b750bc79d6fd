"""Issue 56: `PEEVAL_DATA_MIRROR` naming a changed copy of a mirror folder scored the stale `datasets` cache (ppl
301.36; a fresh cache gives 303.51): datasets keys a local folder by path and modification times. The cache is
now keyed by the folder's content."""

import json
import os


def test_a_changed_mirror_folder_with_the_old_times_is_read_afresh(tmp_path, monkeypatch):
    import datasets

    from peeval import data

    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "mirror" / "local" / "x" / "test.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"text": "aaa"}) + "\n")
    times = os.stat(f)
    assert list(data.load_dataset("local/x", split="test")["text"]) == ["aaa"]
    f.write_text(json.dumps({"text": "bbb"}) + "\n")  # the same path, size and modification time: other text
    os.utime(f, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert list(data.load_dataset("local/x", split="test")["text"]) == ["bbb"]
    assert list(data.load_dataset("local/x", split="test")["text"]) == ["bbb"]  # and cached as such


def test_lm_eval_own_task_from_a_changed_mirror_copy_is_read_afresh(tmp_path, monkeypatch, hub_offline):
    """Issue 56, for lm-eval's built-in tasks too: hellaswag read from `PEEVAL_DATA_MIRROR`, then the mirror folder
    replaced by a changed copy with the old modification times (`cp -p`, a restored backup): the stale datasets cache
    was scored. Its cache is keyed by the folder's content, as peeval's own tasks' are."""
    import datasets
    import lm_eval.tasks
    from helpers.mirrors import write_hub_layout
    from lm_eval.tasks import TaskManager

    from peeval.data import patch_lm_eval_tasks

    patch_lm_eval_tasks()
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "mirror"))
    write_hub_layout(tmp_path / "mirror")
    folder = tmp_path / "mirror" / "hf" / "Rowan" / "hellaswag" / "data"
    root = os.path.join(os.path.dirname(lm_eval.tasks.__file__), "hellaswag")

    def first_context() -> str:
        tm = TaskManager(include_path=[root], include_defaults=False)
        task = tm.load_task_or_group(["hellaswag"])["hellaswag"]
        return task.doc_to_text(task.validation_docs()[0])

    assert first_context().startswith("Removing ice from car: Then, the man writes over the snow")
    f = folder / "validation-00000-of-00001.parquet"
    times = os.stat(f)
    ds = datasets.Dataset.from_parquet(str(f))
    cat = "Then, the cat writes over the snow covering the window of a car, and a woman"
    changed = ds.map(lambda r, i: {"ctx_a": cat} if i == 0 else {}, with_indices=True)
    changed.to_parquet(str(tmp_path / "changed.parquet"))
    os.replace(tmp_path / "changed.parquet", f)
    os.utime(f, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert first_context().startswith("Removing ice from car: Then, the cat writes over the snow")
