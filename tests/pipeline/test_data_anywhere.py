"""`peeval data` against a loopback server that speaks the hub's file protocol (tests/helpers/loopback_hub.py),
through huggingface_hub's own download code: a fresh root is filled in the mirror's layout and verified,
a corrupted download is one line and leaves nothing, the next run is offline, and the committed manifest
matches the real mirror. The command runs in a subprocess: huggingface_hub reads HF_ENDPOINT and
HF_HUB_OFFLINE when it is imported."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from helpers.data_mirror import MIRROR, needs_mirror
from helpers.loopback_hub import LoopbackHub

REPO_ID = "peeval-test/mirror"

# a tiny fake mirror: two folders in the mirror's layout, and one from a "public" model repository
BOOKS = {"README.md": b"---\nconfigs:\n- config_name: default\n---\n# tiny books\n",
         "data/test.txt": b"It was a dark and stormy night.\n" * 40,
         "data/train.txt": b"Call me Ishmael.\n" * 60}  # fmt: skip
PROOFS = {"data/test.tex": b"\\begin{lemma} $1+1=2$ \\end{lemma}\n" * 30}
VOCAB = b'{"a": 0, "b": 1}\n'
MERGES = b"#version: 0.2\na b\n"
TOK_FILES = {"vocab.json": "vocab.json", "encoder.json": "vocab.json", "merges.txt": "merges.txt"}  # mirror <- hub


def entry(files: dict[str, bytes], **extra) -> dict:
    return {"files": {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in files.items()}, **extra}


def manifest(tmp: Path) -> Path:
    m = {
        "format": 1,
        "folders": {
            "local/tiny-books": entry(BOOKS, source=None, mirror_only="mirror-only until a public slice is pinned"),
            "local/tiny-proofs": entry(PROOFS, source=None, mirror_only="mirror-only until a public slice is pinned"),
            "tokenizers/tiny": entry(
                {"vocab.json": VOCAB, "encoder.json": VOCAB, "merges.txt": MERGES},
                source={"repo_id": "tiny-org/tiny-tok", "repo_type": "model", "revision": "v1", "files": TOK_FILES},
            ),
        },
    }
    path = tmp / "manifest.json"
    path.write_text(json.dumps(m))
    return path


def served() -> dict:
    mirror = {f"local/tiny-books/{n}": b for n, b in BOOKS.items()}
    mirror |= {f"local/tiny-proofs/{n}": b for n, b in PROOFS.items()}
    return {("dataset", REPO_ID): mirror, ("model", "tiny-org/tiny-tok"): {"vocab.json": VOCAB, "merges.txt": MERGES}}


def peeval_data(tmp: Path, *args, endpoint: str | None = None, offline=False, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))}
    e |= {
        "HF_HOME": str(tmp / "hf-home"),
        "PYTHONPATH": REPO,
        "PEEVAL_DATA_LOCK": str(tmp / "data.lock.json"),
        **(env or {}),
    }
    if endpoint:
        e["HF_ENDPOINT"] = endpoint
    if offline:
        e |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "peeval.cli", "data", *args], cwd=tmp, env=e, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_fetch_verify_then_offline(tmp_path):
    m, root = manifest(tmp_path), tmp_path / "data"
    with LoopbackHub(served(), revisions=("main", "v1")) as hub:
        r = peeval_data(tmp_path, "--root", str(root), "--manifest", str(m), "--repo", REPO_ID,
                        "--folders", "local/tiny-books,local/tiny-proofs", endpoint=hub.endpoint)  # fmt: skip
        assert r.returncode == 0, r.stderr
        t = peeval_data(tmp_path, "--root", str(root), "--manifest", str(m), "--folders", "tokenizers/tiny",
                        endpoint=hub.endpoint)  # fmt: skip
        assert t.returncode == 0, t.stderr
        gets = [p for c, p in hub.requests if c == "GET"]
        v1 = hub.commit(("model", "tiny-org/tiny-tok"), "v1")
    # exactly the mirror's layout, byte for byte, and nothing else (no staging folder, no .cache)
    want = {f"local/tiny-books/{n}": b for n, b in BOOKS.items()}
    want |= {f"local/tiny-proofs/{n}": b for n, b in PROOFS.items()}
    want |= {
        f"tokenizers/tiny/{n}": b for n, b in (("vocab.json", VOCAB), ("encoder.json", VOCAB), ("merges.txt", MERGES))
    }
    assert tree(root) == want
    assert f"/datasets/{REPO_ID}/resolve/main/local/tiny-books/data/test.txt" in gets  # through the hub's URL layout
    # v1 resolved once (a HEAD), then fetched at that commit, which the data lock records
    assert f"/tiny-org/tiny-tok/resolve/{v1}/vocab.json" in gets and len([g for g in gets if "tiny-tok" in g]) == 2
    assert "downloaded from" in r.stdout and REPO_ID in r.stdout
    # the server is gone and the hub is off: the second run reads the verified copies
    lock = json.loads((tmp_path / "data.lock.json").read_text())["folders"]
    assert set(lock) == {"tokenizers/tiny"} and lock["tokenizers/tiny"]["commit"] == v1
    assert lock["tokenizers/tiny"]["inputs"] == {"vocab.json": hashlib.sha256(VOCAB).hexdigest(),
                                                 "merges.txt": hashlib.sha256(MERGES).hexdigest()}  # fmt: skip
    again = peeval_data(tmp_path, "--root", str(root), "--manifest", str(m), offline=True)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("verified in") == 3 and "download" not in again.stdout
    assert tree(root) == want


def test_corrupt_download_is_one_line_and_keeps_nothing(tmp_path):
    m, root = manifest(tmp_path), tmp_path / "data"
    repos = served()
    repos[("dataset", REPO_ID)]["local/tiny-books/data/train.txt"] = b"Call me Ishmael!\n" * 60  # same size
    with LoopbackHub(repos) as hub:
        r = peeval_data(tmp_path, "--root", str(root), "--manifest", str(m), "--repo", REPO_ID,
                        "--folders", "local/tiny-books", endpoint=hub.endpoint)  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "local/tiny-books/data/train.txt" in lines[0] and "sha256" in lines[0], r.stderr
    assert not root.exists()  # not even the folders it would have made


def test_changed_local_copy_is_downloaded_again(tmp_path):
    m, root = manifest(tmp_path), tmp_path / "data"
    for n, b in BOOKS.items():
        (root / "local/tiny-books" / n).parent.mkdir(parents=True, exist_ok=True)
        (root / "local/tiny-books" / n).write_bytes(b)
    (root / "local/tiny-books/data/test.txt").write_bytes(b"edited\n")
    with LoopbackHub(served()) as hub:
        r = peeval_data(tmp_path, "--root", str(root), "--manifest", str(m), "--folders", "local/tiny-books",
                        endpoint=hub.endpoint, env={"PEEVAL_DATA_REPO": REPO_ID})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "local/tiny-books/data/test.txt" in r.stdout and "again" in r.stdout
    assert tree(root / "local/tiny-books") == BOOKS


@pytest.mark.parametrize(
    "args, says",
    [
        (["--folders", "local/tiny-books"], "mirror-only until a public slice is pinned"),  # nothing to download from
        (["--folders", "local/nope"], "local/nope"),
        (["--folders", "local/tiny-books", "--repo", "no-slash"], "--repo"),
        (["--profile", "no-such-profile"], "no-such-profile"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, says):
    root = tmp_path / "data"
    r = peeval_data(tmp_path, "--root", str(root), "--manifest", str(manifest(tmp_path)), *args, offline=True)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
    assert not root.exists()


def test_missing_on_the_hub_is_one_line(tmp_path):
    """The hub answers but has no such repository (a wrong pin): one line naming the folder, file and repository."""
    with LoopbackHub({}) as hub:
        r = peeval_data(tmp_path, "--root", str(tmp_path / "data"), "--manifest", str(manifest(tmp_path)),
                        "--folders", "tokenizers/tiny", endpoint=hub.endpoint)  # fmt: skip
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "tokenizers/tiny" in r.stderr and "merges.txt" in r.stderr and "tiny-org/tiny-tok@v1" in r.stderr
    assert not (tmp_path / "data").exists()


def test_every_profile_names_manifest_folders():
    """Each parameter file's data.mirror is in the committed manifest, and the manifest pins every file of
    the mirror folders (sha256 computed here from the mirror, when there is one)."""
    folders = json.loads((Path(REPO) / "peeval/data/manifest.json").read_text())["folders"]
    for p in sorted((Path(REPO) / "params").glob("*.yaml")):
        mirror = (yaml.safe_load(p.read_text()).get("data") or {}).get("mirror", [])
        assert set(mirror) <= set(folders), p.name
    for rel, e in folders.items():  # issue 56: a folder with no pinned public source is not in the manifest
        assert e["source"] is not None and "mirror_only" not in e, rel
    if not (MIRROR / "local" / "gutenberg-train").is_dir():
        pytest.skip("no data mirror")
    for rel in ("local/gutenberg-eval", "tokenizers/gpt2"):
        on_disk = {str(p.relative_to(MIRROR / rel)) for p in (MIRROR / rel).rglob("*") if p.is_file()}
        assert on_disk == set(folders[rel]["files"]), rel
        for name, f in folders[rel]["files"].items():
            assert hashlib.sha256((MIRROR / rel / name).read_bytes()).hexdigest() == f["sha256"], f"{rel}/{name}"
    # the GPT-2 files are OpenAI's originals: the sha256 that tiktoken pins (mirror README)
    gpt2 = folders["tokenizers/gpt2"]["files"]
    assert gpt2["vocab.json"]["sha256"] == "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
    assert gpt2["merges.txt"]["sha256"] == "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"


def test_data_stage_error_names_no_spec(tmp_path):
    """The pipeline's `data` stage with an empty mirror and nothing to download from: one line per folder, no
    'SPEC section 8'."""
    work = tmp_path / "repo"
    (work / "pipelines").mkdir(parents=True)
    for f in ("check_data.py", "common.py", "pipeline_params.py"):
        (work / "pipelines" / f).write_bytes((Path(REPO) / "pipelines" / f).read_bytes())
    params = (Path(REPO) / "params" / "smoke.yaml").read_text().replace("root: ../shared/data", "root: empty-mirror")
    (work / "params.yaml").write_text(params)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))}
    e |= {
        "PYTHONPATH": REPO,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),
        "PEEVAL_DATA_LOCK": str(tmp_path / "data.lock.json"),
    }
    r = subprocess.run([sys.executable, "pipelines/check_data.py"], cwd=work, env=e, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 2
    assert "SPEC" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    mirror = yaml.safe_load(params)["data"]["mirror"]
    assert len(lines) == len(mirror) and all(any(rel in ln for ln in lines) for rel in mirror), r.stderr
    assert not (work / "empty-mirror").exists() and not (work / "data" / "manifest.json").exists()


@pytest.mark.slow
@needs_mirror("local", "gutenberg-train", reason="no data mirror to serve")
def test_leaderboard_smoke_from_a_loopback_hub(tmp_path, data_mirror):
    """Issue 32 item 1, done-when: a fresh copy with no ../shared beside it and the mirror served only by a
    loopback hub: `make leaderboard PROFILE=smoke` fetches, verifies and runs end to end; then `peeval data`
    reads the copies offline (server stopped)."""
    from helpers.worktree import copy_working_tree

    work = copy_working_tree(tmp_path / "clone" / "repo")
    assert not (work.parent / "shared").exists()
    entries = json.loads((Path(REPO) / "peeval/data/manifest.json").read_text())["folders"]
    folders = yaml.safe_load((Path(REPO) / "params/smoke.yaml").read_text())["data"]["mirror"]
    files = {f"{rel}/{name}": data_mirror / rel / name for rel in folders for name in entries[rel]["files"]}
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(work), "HF_HOME": str(tmp_path / "hf-home"),
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    subprocess.run(
        [str(venv / "bin" / "dvc"), "config", "--local", "core.no_scm", "true"], cwd=work, env=env, check=True
    )
    with LoopbackHub({("dataset", REPO_ID): files}) as hub:
        make = ["make", "leaderboard", "PROFILE=smoke", f"VENV={venv}", "-o", f"{venv}/.peeval-installed"]
        r = subprocess.run(make, cwd=work, env=env | {"HF_ENDPOINT": hub.endpoint, "PEEVAL_DATA_REPO": REPO_ID},
                           capture_output=True, text=True, timeout=3600)  # fmt: skip
        fetched = [p for c, p in hub.requests if c == "GET" and "/resolve/" in p]  # (not the library's /api/ calls)
    assert r.returncode == 0, f"{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    assert sorted(fetched) == sorted(f"/datasets/{REPO_ID}/resolve/main/{f}" for f in files)  # each file once
    data = work.parent / "shared" / "data"  # params data.root: ../shared/data
    for rel_name, src in files.items():
        assert (data / rel_name).read_bytes() == src.read_bytes(), rel_name
    assert (work / "leaderboard" / "public" / "index.html").is_file()
    record = json.loads((work / "data" / "manifest.json").read_text())
    assert set(record["sources"]) == set(folders)
    # the server is gone and the hub is off: params.yaml's folders are read from the copies
    again = subprocess.run([sys.executable, "-m", "peeval.cli", "data"], cwd=work, capture_output=True, text=True,
                           env=env | {"HF_HUB_OFFLINE": "1"}, timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("verified in") == len(folders) and "download" not in again.stdout


def _lm_eval_dataset_path(task: str) -> str:
    """``dataset_path`` of lm-eval's own YAML for ``task`` (or the template it includes), read from the
    installed lm-eval's files."""
    import lm_eval

    for f in sorted((Path(lm_eval.__file__).parent / "tasks").rglob("*.yaml")):
        text = f.read_text(errors="replace")
        if task not in text:
            continue
        doc = yaml.safe_load(text.replace("!function", "")) or {}
        if not isinstance(doc, dict) or doc.get("task") != task:
            continue
        if "dataset_path" not in doc and doc.get("include"):
            doc = {**(yaml.safe_load((f.parent / doc["include"]).read_text().replace("!function", "")) or {}), **doc}
        return doc["dataset_path"]
    raise AssertionError(f"lm-eval has no task {task}")


@pytest.mark.parametrize(
    "task, hub_id",
    [("lambada_openai", "EleutherAI/lambada_openai"), ("piqa", "baber/piqa"), ("arc_easy", "allenai/ai2_arc"),
     ("arc_challenge", "allenai/ai2_arc"), ("blimp_adjunct_island", "nyu-mll/blimp"),
     ("mmlu_philosophy", "cais/mmlu")],
)  # fmt: skip
def test_task_folders_are_what_lm_eval_reads(task, hub_id):
    from peeval.data.sources import task_folders

    assert _lm_eval_dataset_path(task) == hub_id
    assert task_folders([task]) == [f"hf/{hub_id}"]


def test_profile_folders_include_the_suites_datasets(tmp_path):
    """cpu's zero-shot suites read six hub datasets through the mirror; smoke's suite reads only data.mirror's."""
    from peeval.data.sources import params_data

    root, smoke = params_data(Path(REPO), "smoke")
    assert (
        root == "../shared/data"
        and smoke == yaml.safe_load((Path(REPO) / "params/smoke.yaml").read_text())["data"]["mirror"]
    )
    _, cpu = params_data(Path(REPO), "cpu")
    assert cpu[: len(smoke)] == smoke
    assert set(cpu[len(smoke) :]) == {"hf/EleutherAI/lambada_openai", "hf/baber/piqa", "hf/allenai/ai2_arc",
                                      "hf/Rowan/hellaswag", "hf/nyu-mll/blimp", "hf/cais/mmlu"}  # fmt: skip
    _, claims = params_data(Path(REPO), "cpu-claims")  # extends cpu
    assert claims == cpu
