"""Issue 45: PG-19, proof-pile and SCROLLS load through public copies that ``datasets`` 5 reads (its loading-script
repositories ``deepmind/pg19``, ``hoskinson-center/proof-pile`` and ``tau/scrolls`` are refused), chosen by the
``hub_copy`` metadata key and pinned to a commit that the run's provenance names. Offline: a loopback hub serves
small files laid out like the real copies (parquet, jsonl, jsonl.gz, SCROLLS' zip), and only the pinned commits."""

import gzip
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import datasets
import huggingface_hub.constants
import pytest
from helpers.loopback_hub import LoopbackHub

from peeval import data
from peeval.tasks.metadata_keys import chosen_copy
from peeval.tasks.ppl import ppl
from peeval.tasks.scrolls import scrolls

BOOKS = ["Call me Ishmael. " * 40, "It was the best of times. " * 40, "Happy families are all alike. " * 40]
OTHER_COMMIT = "b" * 40
SCRIPTS = {"deepmind/pg19", "hoskinson-center/proof-pile", "tau/scrolls"}
SCROLLS_VALIDATION = [
    {"id": "q1", "pid": "q1_0", "input": "What data?\n\nPaper text.", "output": "the Penn Treebank"},
    {"id": "q1", "pid": "q1_1", "input": "What data?\n\nPaper text.", "output": "wikipedia dumps"},
    {"id": "q2", "pid": "q2_0", "input": "Which model?\n\nPaper text.", "output": "an LSTM tagger"},
]
SCROLLS_TRAIN = [{"id": "t1", "pid": "t1_0", "input": "Q?\n\nTraining text.", "output": "no"}]


def sha_of(texts: list[str]) -> str:
    """The documented hash, recomputed here: each text's UTF-8 length (8 bytes, big-endian), then the text."""
    h = hashlib.sha256()
    for t in texts:
        h.update(len(t.encode()).to_bytes(8, "big") + t.encode())
    return h.hexdigest()


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _served(tmp_path) -> tuple[dict, dict[str, list[str]]]:
    """The loopback hub's repositories, each file where the pinned copy names it, and each file's columns."""
    pg19 = tmp_path / "pg19.parquet"
    rows = [{"short_book_title": f"Book {i}", "publication_date": 1850 + i, "url": f"u{i}", "text": t}
            for i, t in enumerate(BOOKS)]  # fmt: skip
    datasets.Dataset.from_list(rows).to_parquet(pg19)
    proof = [{"text": t, "meta": {"set_name": "stack_exchange", "n": i}} for i, t in enumerate(BOOKS)]
    pose = [{"text": t} for t in BOOKS]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("qasper/validation.jsonl", _jsonl(SCROLLS_VALIDATION))
        z.writestr("qasper/train.jsonl", _jsonl(SCROLLS_TRAIN))
    repos: dict = {}
    for copy in ppl.HUB_COPIES["pg19"].values():
        repos[("dataset", copy.repo)] = {copy.file: pg19}
    files = {"dwzhu/PoSE-Datasets": _jsonl(pose), "hoskinson-center/proof-pile": gzip.compress(_jsonl(proof))}
    for repo, body in files.items():
        repos[("dataset", repo)] = {ppl.HUB_COPIES["proof_pile"][repo].file: body}
    repos[("dataset", "tau/scrolls")] = {"qasper.zip": buf.getvalue()}
    columns = {"emozilla/pg19-test": list(rows[0]), "emozilla/pg19": list(rows[0]), "dwzhu/PoSE-Datasets": ["text"],
               "hoskinson-center/proof-pile": ["text", "meta"],
               "tau/scrolls": ["id", "pid", "input", "output"]}  # fmt: skip
    return repos, columns


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A loopback hub answering only at the pinned commits (and one more), no mirror, fresh caches."""
    repos, columns = _served(tmp_path)
    pins = {c.revision for cs in ppl.HUB_COPIES.values() for c in cs.values()}
    with LoopbackHub(repos, revisions=pins | {OTHER_COMMIT}) as h:
        c = huggingface_hub.constants
        monkeypatch.setattr(
            c, "HUGGINGFACE_CO_URL_TEMPLATE", c.HUGGINGFACE_CO_URL_TEMPLATE.replace(c.ENDPOINT, h.endpoint)
        )
        monkeypatch.setattr(c, "ENDPOINT", h.endpoint)
        monkeypatch.setattr(c, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")
        monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "no-mirror"))
        h.columns = columns
        yield h


def _read(task: str, build, *args, **metadata):
    with data.recording() as reads, data.reading(task):
        out = build(*args, **metadata)
    (read,) = reads[task]
    return out, read


def _ppl(corpus: str, **metadata):
    return _read(f"peeval_ppl_{corpus}", ppl.build_dataset, ppl.CORPORA[corpus], lengths=[16], protocol="windows",
                 **metadata)  # fmt: skip


COPIES = [(corpus, repo) for corpus, copies in ppl.HUB_COPIES.items() if corpus in ppl.CORPORA for repo in copies]


@pytest.mark.parametrize(("corpus", "repo"), COPIES)
def test_each_perplexity_copy_loads_its_test_split_at_its_pinned_commit(hub, corpus, repo):
    copy = ppl.HUB_COPIES[corpus][repo]
    ds = data.load_dataset(ppl.CORPORA[corpus], split="test", copy=copy)
    assert ds.column_names == hub.columns[repo] and str(ds.split) == "test" and ds["text"] == BOOKS
    default = next(iter(ppl.HUB_COPIES[corpus])) == repo
    rows, read = _ppl(corpus, **({} if default else {"hub_copy": repo}))
    assert rows["test"]["text"] == BOOKS  # one length: one row per document, in order
    assert (read["source"], read["location"], read["split"]) == ("hub", repo, "test")
    assert read["revision"] == hub.commit(("dataset", repo), copy.revision)  # what the hub answered at the pin
    assert read["documents"] == 3 and read["documents_sha256"] == sha_of(BOOKS)
    assert ("GET", f"/datasets/{repo}/resolve/{copy.revision}/{copy.file}") in hub.requests


def test_scrolls_reads_its_own_zip_with_the_json_builder(hub, monkeypatch):
    # datasets offline (as HF_DATASETS_OFFLINE=1 and CI run it): the zip's member is read from the local download,
    # never through datasets' remote-file layer, which refuses a zip:// URL offline even for a cached file
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    copy = scrolls.HUB_COPIES["scrolls"]["tau/scrolls"]
    ds = data.load_dataset("tau/scrolls", "qasper", split="validation", copy=copy)
    assert ds.column_names == hub.columns["tau/scrolls"] and str(ds.split) == "validation"
    assert ds.to_list() == SCROLLS_VALIDATION  # the validation member, not train
    docs, read = _read("peeval_scrolls_qasper", scrolls.build_dataset, "qasper")
    assert [(d["id"], d["outputs"]) for d in docs["validation"]] == [
        ("q1", ["the Penn Treebank", "wikipedia dumps"]),
        ("q2", ["an LSTM tagger"]),
    ]
    assert (read["source"], read["location"], read["config"], read["split"]) == ("hub", "tau/scrolls", "qasper",
                                                                                  "validation")  # fmt: skip
    assert read["revision"] == hub.commit(("dataset", "tau/scrolls"), copy.revision) and read["documents"] == 3
    assert ("GET", f"/datasets/tau/scrolls/resolve/{copy.revision}/qasper.zip") in hub.requests


def test_the_loading_script_repositories_are_never_what_datasets_loads(hub, monkeypatch):
    asked = []
    real = datasets.load_dataset

    def load_dataset(path, *args, **kwargs):
        asked.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    _ppl("pg19")
    _ppl("proof_pile")
    _read("peeval_scrolls_qasper", scrolls.build_dataset, "qasper")
    assert asked == ["parquet", "json", "json"] and not SCRIPTS & set(asked)
    assert not any(r in path for _, path in hub.requests for r in SCRIPTS - {"tau/scrolls"})


def test_another_commit_is_read_and_recorded_when_named(hub):
    _, read = _ppl("pg19", hub_copy=f"emozilla/pg19-test@{OTHER_COMMIT}")
    assert read["revision"] == hub.commit(("dataset", "emozilla/pg19-test"), OTHER_COMMIT)
    assert read["revision"] != hub.commit(
        ("dataset", "emozilla/pg19-test"), ppl.HUB_COPIES["pg19"]["emozilla/pg19-test"].revision
    )


def test_the_mirror_stays_first_unless_a_copy_is_named(hub, tmp_path, monkeypatch):
    folder = tmp_path / "mirror" / "local" / "gutenberg-eval"
    (folder / "data").mkdir(parents=True)
    datasets.Dataset.from_list([{"text": BOOKS[2]}, {"text": BOOKS[0]}]).to_parquet(folder / "data" / "test-0.parquet")
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n"
                                      "    path: data/test-*\n---\n")  # fmt: skip
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "mirror"))
    rows, read = _ppl("pg19")
    assert (read["source"], read["location"], read["revision"]) == ("mirror", "local/gutenberg-eval", None)
    assert rows["test"]["text"] == [BOOKS[2], BOOKS[0]] and not hub.requests
    rows, read = _ppl("pg19", hub_copy="emozilla/pg19")  # PG-19 itself, not the mirror's stand-in
    assert (read["source"], read["location"]) == ("hub", "emozilla/pg19") and rows["test"]["text"] == BOOKS


def test_offline_without_mirror_is_one_clear_error(hub_offline, tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "no-mirror"))
    with pytest.raises(
        FileNotFoundError, match=r"dataset 'deepmind/pg19' is neither in the mirror .*PEEVAL_DATA_MIRROR"
    ):
        _ppl("pg19")


def test_a_copy_of_another_corpus_is_left_to_it_and_a_list_names_one_per_corpus():
    pg19, pose = ppl.HUB_COPIES["pg19"]["emozilla/pg19"], ppl.HUB_COPIES["proof_pile"]["dwzhu/PoSE-Datasets"]
    both = {"hub_copy": ["emozilla/pg19", "dwzhu/PoSE-Datasets"]}
    assert chosen_copy("peeval_ppl_pg19", "pg19", both) == pg19
    assert chosen_copy("peeval_ppl_proof_pile", "proof_pile", both) == pose
    assert chosen_copy("peeval_ppl_proof_pile", "proof_pile", {"hub_copy": "emozilla/pg19"}) is None
    assert chosen_copy("peeval_scrolls_qasper", "scrolls", {"hub_copy": "emozilla/pg19"}) is None
    assert chosen_copy("peeval_ppl_pg19", "pg19", {}) is None


@pytest.mark.parametrize(
    "value",
    [
        "deepmind/pg19",  # the loading script itself
        "emozilla/pg19-tset",
        "emozilla/pg19-test@main",  # a branch moves: a commit only
        "emozilla/pg19-test@c5e39bf",
        "emozilla/pg19-test@",
        7,
        ["emozilla/pg19", "emozilla/pg19-test"],  # two copies of one corpus
    ],
)
def test_a_wrong_hub_copy_is_refused_in_one_line(value):
    with pytest.raises(ValueError, match=r"^peeval_ppl_pg19 metadata hub_copy=") as e:
        chosen_copy("peeval_ppl_pg19", "pg19", {"hub_copy": value})
    assert "\n" not in str(e.value)


def test_peeval_eval_refuses_a_wrong_hub_copy_with_exit_2(tmp_path, capsys):
    from helpers.checkpoints import save_tiny_checkpoint

    from peeval.cli import main

    ckpt = save_tiny_checkpoint(tmp_path / "rope", ["the cat sat on the mat 0123456789"], pe="rope", vocab_size=300,
                                max_positions=64)  # fmt: skip
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ckpt}", "--tasks", "peeval_ppl_pg19",
            "--device", "cpu", "--metadata", json.dumps({"hub_copy": "deepmind/pg19"}),
            "--output_path", str(tmp_path / "out")]  # fmt: skip
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [li for li in err.splitlines() if li.startswith("peeval eval: error: ")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert "hub_copy='deepmind/pg19'" in lines[0] and "emozilla/pg19-test" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_plain_lm_eval_refuses_a_wrong_scrolls_copy_when_it_builds_the_task(tmp_path, monkeypatch):
    """No peeval CLI in front: the SCROLLS task refuses the value before anything is read."""
    from lm_eval.tasks import TaskManager, get_task_dict

    from peeval.tasks.metadata_keys import keys_for

    assert "hub_copy" in keys_for("peeval_scrolls_qasper") and "hub_copy" in keys_for("peeval_ppl_pg19")
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "no-mirror"))
    tm = TaskManager(include_path=[str(Path(ppl.__file__).parents[1])], include_defaults=False,
                     metadata={"hub_copy": "tau/scrolls@refs/pr/5"})  # fmt: skip
    with pytest.raises(ValueError, match=r"^peeval_scrolls_qasper metadata hub_copy='tau/scrolls@refs/pr/5': must be"):
        get_task_dict(["peeval_scrolls_qasper"], tm)


def test_every_copy_is_pinned_to_a_commit_and_read_by_a_packaged_builder():
    copies = [c for cs in ppl.HUB_COPIES.values() for c in cs.values()]  # every corpus: peeval.data.HUB_COPIES
    assert len(copies) == 5 and all(re.fullmatch(r"[0-9a-f]{40}", c.revision) for c in copies)
    assert {c.builder for c in copies} == {"parquet", "json"}  # never a repository's loading script


def test_a_copy_is_labelled_as_the_corpus_it_copies():
    """The site names a read by its corpus: a parquet / jsonl copy of PG-19 or proof-pile is that corpus's test
    split, not a repository name (and never the mirror's stand-in)."""
    from peeval.records import data_label

    expected = {"pg19": "PG-19 test", "proof_pile": "proof-pile test"}
    for corpus, copies in ppl.HUB_COPIES.items():
        if corpus in expected:
            for repo in copies:
                assert data_label("hub", repo) == expected[corpus], repo
    assert data_label("mirror", "local/gutenberg-eval") != "PG-19 test"
