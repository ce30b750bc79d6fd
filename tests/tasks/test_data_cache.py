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
