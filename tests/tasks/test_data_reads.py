"""What a task read is recorded (peeval.data.recording): a corpus read from the mirror and the same task read
from the hub are told apart (source, location, hub commit), and the hash is of the documents scored."""

import hashlib

import datasets
import pytest

from peeval import data
from peeval.tasks.ppl.ppl import build_dataset

BOOKS = ["Call me Ishmael. " * 40, "It was the best of times. " * 40, "Happy families are all alike. " * 40]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def sha_of(texts: list[str]) -> str:
    """The documented hash, recomputed here: each text's UTF-8 length (8 bytes, big-endian), then the text."""
    h = hashlib.sha256()
    for t in texts:
        h.update(len(t.encode()).to_bytes(8, "big") + t.encode())
    return h.hexdigest()


def write_mirror(root, texts):
    folder = root / "local" / "gutenberg-eval"
    (folder / "data").mkdir(parents=True)
    datasets.Dataset.from_list([{"text": t} for t in texts]).to_parquet(folder / "data" / "test-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*\n---\n"
    )


def read_pg19(**metadata) -> list[dict]:
    with data.recording() as reads, data.reading("peeval_ppl_pg19"):
        build_dataset("deepmind/pg19", lengths=[16], protocol="windows", **metadata)
    return reads["peeval_ppl_pg19"]


def test_mirror_read_names_the_folder_and_hashes_the_selected_documents(tmp_path, monkeypatch):
    write_mirror(tmp_path / "mirror", BOOKS)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "mirror"))
    (read,) = read_pg19(max_docs=2)
    assert (read["source"], read["location"], read["revision"]) == ("mirror", "local/gutenberg-eval", None)
    assert read["documents"] == 2 and read["documents_sha256"] == sha_of(BOOKS[:2])
    assert read_pg19()[0]["documents_sha256"] == sha_of(BOOKS)  # every document when max_docs is not set


def test_the_hash_changes_with_the_documents(tmp_path, monkeypatch):
    for name, books in (("a", BOOKS), ("b", [BOOKS[0], BOOKS[1] + "!"]), ("c", [BOOKS[1], BOOKS[0]])):
        write_mirror(tmp_path / name, books)
    got = []
    for name in "abc":
        monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / name))
        # datasets' cache serves a same-named folder's first copy again (its key is not the file contents)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / name / "cache")
        got.append(read_pg19(max_docs=2)[0]["documents_sha256"])
    assert len(set(got)) == 3  # one character changed, or the order: another hash


def test_hub_read_names_the_hub_id_and_commit(tmp_path, monkeypatch):
    """A hub load (no mirror) of a dataset datasets reads as named: the hub id and the commit the datasets cache
    folder is named by (PG-19 itself is read from a pinned copy: test_hub_copies.py)."""
    folder = tmp_path / "cache" / "someorg___books" / "default" / "0.0.0" / COMMIT
    datasets.Dataset.from_list([{"text": t} for t in BOOKS]).save_to_disk(folder)
    cached = datasets.Dataset.from_file(str(next(folder.glob("*.arrow"))))
    asked = []

    def hub(path, name=None, split=None, **kwargs):  # stands in for the hub: the test's data, from its cache folder
        asked.append(path)
        return cached

    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "empty"))
    monkeypatch.setattr(datasets, "load_dataset", hub)
    with data.recording() as reads, data.reading("books"):
        build_dataset("someorg/books", lengths=[16], protocol="windows", max_docs=2)
    (read,) = reads["books"]
    assert asked == ["someorg/books"]
    assert (read["source"], read["location"], read["revision"]) == ("hub", "someorg/books", COMMIT)
    assert read["documents_sha256"] == sha_of(BOOKS[:2])


def test_nothing_is_recorded_outside_a_recording(tmp_path, monkeypatch):
    write_mirror(tmp_path / "mirror", BOOKS)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "mirror"))
    with data.reading("peeval_ppl_pg19"):
        build_dataset("deepmind/pg19", lengths=[16], protocol="windows")  # no recording: nothing kept, nothing fails
    with data.recording() as reads:
        build_dataset("deepmind/pg19", lengths=[16], protocol="windows")  # no task being built: filed under none
    assert reads == {}


@pytest.mark.parametrize(
    ("source", "location", "want"),
    [
        ("mirror", "local/gutenberg-eval", "Gutenberg books (PG-19 substitute)"),
        ("hub", "deepmind/pg19", "PG-19 test"),
        ("mirror", "local/stacks-project", "Stacks project (proof-pile substitute)"),
        ("mirror", "hf/EleutherAI/lambada_openai", "EleutherAI/lambada_openai (mirror copy)"),
        ("hub", "EleutherAI/lambada_openai", "EleutherAI/lambada_openai"),
    ],
)
def test_data_labels(source, location, want):
    from peeval.records import data_label

    assert data_label(source, location) == want


def test_a_mirror_corpus_never_shares_a_label_with_the_dataset_it_replaces():
    from peeval.records import task_label

    for hub_id, folder in data.LOCAL.items():
        for task in ("peeval_ppl_pg19", "some_task"):
            assert task_label(task, [("hub", hub_id)]) != task_label(task, [("mirror", folder)])
            assert task_label(task, []) not in (
                task_label(task, [("hub", hub_id)]),
                task_label(task, [("mirror", folder)]),
            )
    assert task_label("lambada_openai", [("mirror", "hf/EleutherAI/lambada_openai")]) != task_label(
        "lambada_openai", [("hub", "EleutherAI/lambada_openai")]
    )
