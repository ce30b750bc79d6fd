"""Folders rebuilt from public raw files (peeval.data.rebuild): each Gutenberg cleaning rule on a tiny e-book, and
`peeval data` against a loopback raw-file server (tests/helpers/loopback_raw.py) with a tiny manifest: rebuilt,
verified by the rows' hash, recorded in the data lock; a tampered file is refused in one line and nothing kept."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO
from helpers.data_mirror import MIRROR, needs_mirror
from helpers.loopback_raw import LoopbackRaw

from peeval.data import documents_sha256
from peeval.data.rebuild import clean_gutenberg

COMMIT = "0123456789abcdef0123456789abcdef01234567"
PG_HEAD = (
    "\ufeffThe Project Gutenberg EBook of Tiny, by Nobody\r\n\r\nTitle: Tiny\r\n\r\n"
    "*** START OF THIS PROJECT GUTENBERG EBOOK TINY ***\r\n\r\n\r\n"
)
PG_TAIL = (
    "\r\n\r\n\r\nEnd of the Project Gutenberg EBook of Tiny\r\n\r\n*** END OF THIS PROJECT GUTENBERG EBOOK TINY ***\r\n"
)


def pg(body: str, head: str = PG_HEAD, tail: str = PG_TAIL) -> bytes:
    return (head + body.replace("\n", "\r\n") + tail).encode("utf-8")


def test_header_and_footer_are_cut_crlf_and_bom_dropped():
    assert clean_gutenberg(pg("TINY\n\nIt was a dark night.")) == "TINY\n\nIt was a dark night.\n"


def test_indented_end_marker_cuts_and_leading_indentation_stays():
    raw = pg(
        "      TINY\n\nThe end.\n\n        \n", tail="            *** END OF THE PROJECT GUTENBERG EBOOK TINY ***\n"
    )
    assert clean_gutenberg(raw) == "      TINY\n\nThe end.\n\n        \n"


def test_old_footer_without_end_marker():
    raw = pg("TINY\n\nText.", tail="\n\nThe Project Gutenberg Etext of Tiny\nlicence text")
    assert clean_gutenberg(raw) == "TINY\n\nText.\n"


@pytest.mark.parametrize(
    "notice",
    ["Produced by Jane Doe and the Online\nDistributed Proofreading Team at http://www.pgdp.net",
     "Transcribed from the 1889 edition by David Price, email\nccx074@pglaf.org",
     "Scanned and proofread by A. Reader",
     "[Transcriber's note: assembled for Project Gutenberg.]",
     "This e-text uses uncommon characters.",
     "The html version contains the drawings.",
     "This etext was prepared by Joe."],
)  # fmt: skip
def test_notice_paragraph_near_the_start_is_dropped(notice):
    assert clean_gutenberg(pg(f"{notice}\n\n\nTINY\n\nText.")) == "TINY\n\nText.\n"


def test_notice_paragraph_in_the_middle_or_long_is_kept():
    filler = "\n\n".join(["Plain words of the story go on here."] * 300)  # > 8,000 characters each side
    middle = f"{filler}\n\nThis etext was prepared by Joe.\n\n{filler}"
    assert clean_gutenberg(pg(middle)) == middle + "\n"
    long = "This etext was prepared by Joe; " + "x" * 2000
    assert clean_gutenberg(pg(f"{long}\n\nTINY")) == f"{long}\n\nTINY\n"


def test_produced_by_only_at_a_paragraph_start():
    text = "TINY\n\nThe fire is produced by the glass globe."  # not a credit: lower case, inside a sentence
    assert clean_gutenberg(pg(text)) == text + "\n"


# ----------------------------------------------------------------------------- peeval data with a tiny manifest
TEX = {"a.tex": b"\\section{A}\nLemma.\n", "b.tex": "\\section{B} caf\u00e9\n".encode()}
BOOK = pg("TINY\n\nA tiny book.")
BOOK_ROWS = [{"short_book_title": "Tiny by Nobody", "publication_date": -1, "url": "http://www.gutenberg.org/ebooks/7",
              "text": "TINY\n\nA tiny book.\n"}]  # fmt: skip


def stacks_rows():
    from peeval.data.rebuild import git_blob

    return [{"text": b.decode(), "meta": json.dumps({"set_name": "stacks-project", "source": "org/tex", "file": n,
             "url": f"https://github.com/org/tex/blob/{COMMIT}/{n}", "commit": COMMIT, "blob": git_blob(b),
             "license": "GFDL-1.2"})} for n, b in TEX.items()]  # fmt: skip


def manifest(tmp: Path) -> Path:
    fake = {"bytes": 1, "sha256": "0" * 64}  # the mirror's parquet bytes: never equal to a rebuild here
    folders = {
        "local/tex": {"files": {"README.md": {**fake, "optional": True}, "data/test.parquet": fake},
                      "source": {"kind": "github", "repo": "org/tex", "commit": COMMIT, "build": "stacks",
                                 "license": "GFDL-1.2", "splits": {"test": {"file": "data/test.parquet",
                                 "rows_sha256": documents_sha256(stacks_rows()), "files": list(TEX)}}}},
        "local/books": {"files": {"README.md": {**fake, "optional": True}, "data/test.parquet": fake},
                        "source": {"kind": "github", "repo": "org/books", "commit": COMMIT, "build": "gutenberg",
                                   "splits": {"test": {"file": "data/test.parquet",
                                   "rows_sha256": documents_sha256(BOOK_ROWS),
                                   "books": [[7, "pg7.txt", "Tiny by Nobody", -1]]}}}},
    }  # fmt: skip
    path = tmp / "manifest.json"
    path.write_text(json.dumps({"format": 1, "folders": folders}))
    return path


def served() -> dict[str, bytes]:
    return {f"org/tex/{COMMIT}/{n}": b for n, b in TEX.items()} | {f"org/books/{COMMIT}/pg7.txt": BOOK}


def peeval_data(tmp: Path, raw: LoopbackRaw | None, *args, offline=False, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))}
    e |= {"HF_HOME": str(tmp / "hf-home"), "PYTHONPATH": REPO, "PEEVAL_DATA_LOCK": str(tmp / "data.lock.json")}
    e |= {"PEEVAL_DATA_RAW_BASE": raw.base} if raw else {}
    e |= {"HF_HUB_OFFLINE": "1"} if offline else {}
    e |= env or {}
    cmd = [sys.executable, "-m", "peeval.cli", "data", "--root", str(tmp / "data"), "--manifest", str(manifest(tmp))]
    return subprocess.run([*cmd, *args], cwd=tmp, env=e, capture_output=True, text=True, timeout=120)


def test_rebuild_verify_lock_then_offline(tmp_path):
    with LoopbackRaw(served()) as raw:
        r = peeval_data(tmp_path, raw)
    assert r.returncode == 0, r.stderr
    root = tmp_path / "data"
    assert pq.read_table(root / "local/tex/data/test.parquet").to_pylist() == stacks_rows()
    assert pq.read_table(root / "local/books/data/test.parquet").to_pylist() == BOOK_ROWS
    assert str(pq.read_table(root / "local/books/data/test.parquet").schema.field("publication_date").type) == "int32"
    lock = json.loads((tmp_path / "data.lock.json").read_text())["folders"]
    assert lock["local/books"]["source"] == "github org/books" and lock["local/books"]["commit"] == COMMIT
    assert lock["local/books"]["inputs"] == {"pg7.txt": hashlib.sha256(BOOK).hexdigest()}
    for rel in ("local/tex", "local/books"):
        files = {str(p.relative_to(root / rel)) for p in (root / rel).rglob("*") if p.is_file()}
        assert files == {"README.md", "data/test.parquet"}
        assert (
            lock[rel]["files"]["data/test.parquet"]["sha256"]
            == hashlib.sha256((root / rel / "data/test.parquet").read_bytes()).hexdigest()
        )
    import datasets  # the README the rebuild writes declares the splits as the mirror's does

    loaded = datasets.load_dataset(str(root / "local/books"), split="test", cache_dir=str(tmp_path / "cache"))
    assert loaded.to_list() == BOOK_ROWS and loaded.features["publication_date"].dtype == "int32"
    again = peeval_data(tmp_path, None, offline=True)  # no server, offline: the lock verifies the rebuilt files
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("verified in") == 2 and "download" not in again.stdout


def test_tampered_raw_file_is_one_line_and_keeps_nothing(tmp_path):
    files = served()
    files[f"org/tex/{COMMIT}/b.tex"] = b"\\section{B} cafe\n"
    with LoopbackRaw(files) as raw:
        r = peeval_data(tmp_path, raw, "--folders", "local/tex")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "local/tex/data/test.parquet" in lines[0] and "nothing kept" in lines[0], r.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "data.lock.json").exists()


def test_a_changed_input_the_lock_recorded_is_refused(tmp_path):
    """Same rows (only the PG header changed), but not the file the first download recorded."""
    files = served()
    with LoopbackRaw(files) as raw:
        assert peeval_data(tmp_path, raw, "--folders", "local/books").returncode == 0
        before = (tmp_path / "data.lock.json").read_bytes()
        files[f"org/books/{COMMIT}/pg7.txt"] = pg("TINY\n\nA tiny book.", head=PG_HEAD.replace("Nobody", "Someone"))
        (tmp_path / "data/local/books/data/test.parquet").write_bytes(b"edited")
        r = peeval_data(tmp_path, raw, "--folders", "local/books")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pg7.txt" in lines[0] and "data lock" in lines[0], r.stderr
    assert (tmp_path / "data/local/books/data/test.parquet").read_bytes() == b"edited"  # nothing swapped in
    assert (tmp_path / "data.lock.json").read_bytes() == before


def test_missing_raw_file_and_bad_source_are_one_line(tmp_path):
    with LoopbackRaw({}) as raw:
        r = peeval_data(tmp_path, raw, "--folders", "local/books")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "local/books" in r.stderr and "pg7.txt" in r.stderr and "404" in r.stderr
    m = json.loads(manifest(tmp_path).read_text())
    m["folders"]["local/books"]["source"]["commit"] = "main"
    (tmp_path / "bad.json").write_text(json.dumps(m))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))} | {"PYTHONPATH": REPO}
    cmd = [sys.executable, "-m", "peeval.cli", "data", "--root", str(tmp_path / "data"), "--manifest"]
    r = subprocess.run(
        [*cmd, str(tmp_path / "bad.json")], cwd=tmp_path, env=e, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "local/books.source.commit" in r.stderr and "40-hex" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "data").exists()


# ----------------------------------------------------------------------------- every cpu folder from loopback sources


def public_copies(entries: dict, folders: list[str]) -> tuple[dict, dict[str, bytes]]:
    """What the loopback hub and raw server serve for ``folders``, made from the mirror itself (CI has no
    network): hub repositories hold the mirror's files at the manifest's paths; the Stacks files are the rows'
    texts unmodified; each Gutenberg book is its row's text wrapped in a PG-style header (with a production
    credit) and footer, in CRLF, so the rebuild checks that the cleaning strips exactly that."""
    repos, raw = {}, {}
    for rel in folders:
        src = entries[rel]["source"]
        if src.get("kind") != "github":
            files = {hub: MIRROR / rel / name for name, hub in src["files"].items()}
            repos[(src.get("repo_type", "dataset"), src["repo_id"])] = files
            continue
        for spec in src["splits"].values():
            rows = pq.read_table(MIRROR / rel / spec["file"]).to_pylist()
            names = spec.get("files") or [b[1] for b in spec["books"]]
            for name, row in zip(names, rows, strict=True):
                text = row["text"] if src["build"] == "stacks" else None
                if text is None:
                    title = row["short_book_title"].upper()
                    head = (
                        f"The Project Gutenberg EBook of {title}\n\n*** START OF THIS PROJECT GUTENBERG EBOOK "
                        f"{title} ***\n\n\n\nProduced by a volunteer\nat http://www.pgdp.net\n\n\n\n"
                    )
                    tail = (
                        f"\n\n\n\nEnd of the Project Gutenberg EBook of {title}\n\n*** END OF THIS PROJECT "
                        f"GUTENBERG EBOOK {title} ***\n\nlicence\n"
                    )
                    text = (head + row["text"] + tail).replace("\n", "\r\n")
                raw[f"{src['repo']}/{src['commit']}/{name}"] = text.encode("utf-8")
    return repos, raw


@pytest.mark.slow
@needs_mirror("local", "gutenberg-train", reason="no data mirror to serve")
def test_cpu_profile_from_loopback_public_sources(tmp_path, data_mirror):
    """Issue 45 item 1, done-when: the mirror removed (an empty PEEVAL_DATA_MIRROR) and only a loopback hub and a
    loopback raw-file server (serving copies made from the mirror: public_copies): `peeval data --profile cpu`
    fetches or rebuilds every folder, each equal to the mirror's rows, and records each in the data lock."""
    from helpers.loopback_hub import LoopbackHub

    from peeval.data.sources import load_manifest, params_data

    entries = load_manifest()
    folders = params_data(Path(REPO), "cpu")[1]
    repos, raw_files = public_copies(entries, folders)
    empty = tmp_path / "mirror"
    empty.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))}
    e |= {"HF_HOME": str(tmp_path / "hf-home"), "PYTHONPATH": REPO, "PEEVAL_DATA_MIRROR": str(empty),
          "PEEVAL_DATA_LOCK": str(tmp_path / "data.lock.json"), "OMP_NUM_THREADS": "1"}  # fmt: skip
    revisions = {"main"} | {e["source"].get("revision", "main") for e in entries.values() if e.get("source")}
    with LoopbackHub(repos, revisions=revisions) as hub, LoopbackRaw(raw_files) as raw:
        e |= {"HF_ENDPOINT": hub.endpoint, "PEEVAL_DATA_RAW_BASE": raw.base}
        r = subprocess.run([sys.executable, "-m", "peeval.cli", "data", "--profile", "cpu"], cwd=REPO, env=e,
                           capture_output=True, text=True, timeout=1800)  # fmt: skip
        assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert sorted(raw.requests) == sorted(raw_files)  # each raw file once
    lock = json.loads((tmp_path / "data.lock.json").read_text())["folders"]
    assert sorted(lock) == sorted(folders)
    for rel in folders:
        src = entries[rel]["source"]
        want_source = (
            f"github {src['repo']}"
            if src.get("kind") == "github"
            else f"hub {src.get('repo_type', 'dataset')} {src['repo_id']}"
        )
        assert lock[rel]["source"] == want_source and lock[rel]["commit"], rel
        for name in entries[rel]["files"] if src.get("kind") == "github" else src["files"]:
            if name.endswith(".parquet"):
                got, want = empty / rel / name, data_mirror / rel / name
                assert pq.read_table(got).to_pylist() == pq.read_table(want).to_pylist(), f"{rel}/{name}"
            elif src.get("kind") != "github":
                assert (empty / rel / name).read_bytes() == (data_mirror / rel / name).read_bytes(), f"{rel}/{name}"


def test_a_read_of_a_fetched_folder_cites_its_source_and_commit(tmp_path, monkeypatch):
    """A task reading a mirror folder `peeval data` downloaded records (results.json peeval.data, the store's
    task_data.revision) the source and commit the data lock names; once the folder is edited, nothing."""
    from peeval import data

    with LoopbackRaw(served()) as raw:
        assert peeval_data(tmp_path, raw, "--folders", "local/books").returncode == 0
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "data"))
    monkeypatch.setenv("PEEVAL_DATA_LOCK", str(tmp_path / "data.lock.json"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))

    def revision_read() -> str | None:
        with data.recording() as reads, data.reading("peeval_ppl_tiny"):
            data.load_dataset("local/books", split="test")
        (read,) = reads["peeval_ppl_tiny"]
        assert (read["source"], read["location"]) == ("mirror", "local/books")
        return read["revision"]

    assert revision_read() == f"github org/books@{COMMIT}"
    readme = tmp_path / "data/local/books/README.md"
    readme.write_text(readme.read_text() + "edited\n")
    assert revision_read() is None


# ----------------------------------------------------------------------------- a hub source on an unpinned revision
def hub_manifest(tmp: Path, parquet: bytes, rows: list[dict]) -> Path:
    card = b"---\nconfigs:\n- config_name: default\n---\n"
    files = {"README.md": {"bytes": len(card), "sha256": hashlib.sha256(card).hexdigest()},
             "data/test.parquet": {"bytes": len(parquet), "sha256": hashlib.sha256(parquet).hexdigest(),
                                   "rows_sha256": documents_sha256(rows)}}  # fmt: skip
    source = {"repo_id": "org/ds", "revision": "main", "files": {n: n for n in files}, "lock_only": ["README.md"]}
    path = tmp / "hub-manifest.json"
    path.write_text(json.dumps({"format": 1, "folders": {"hf/org/ds": {"files": files, "source": source}}}))
    return path


def parquet_bytes(rows: list[dict], tmp: Path, **kw) -> bytes:
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), tmp / "t.parquet", **kw)
    return (tmp / "t.parquet").read_bytes()


def hub_data(tmp: Path, endpoint: str, manifest_path: Path):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))}
    e |= {"HF_HOME": str(tmp / "hf-home"), "PYTHONPATH": REPO, "PEEVAL_DATA_LOCK": str(tmp / "lock.json"),
          "HF_ENDPOINT": endpoint}  # fmt: skip
    cmd = [sys.executable, "-m", "peeval.cli", "data", "--root", str(tmp / "data"), "--manifest", str(manifest_path)]
    return subprocess.run(cmd, cwd=tmp, env=e, capture_output=True, text=True, timeout=120)


def test_hub_folder_on_main_is_verified_by_rows_then_by_the_lock(tmp_path):
    """The hub's parquet is not the mirror's bytes but holds its rows: accepted, and the commit and files it
    resolved recorded; the hub's card (lock_only) is then pinned by the lock: a changed card is refused."""
    from helpers.loopback_hub import LoopbackHub

    rows = [{"q": "Is it?", "a": 1}, {"q": "Or not?", "a": 0}]
    mirror_bytes = parquet_bytes(rows, tmp_path, compression="zstd")
    hub_bytes = parquet_bytes(rows, tmp_path, compression="snappy")
    assert hub_bytes != mirror_bytes
    card = b"---\nconfigs:\n- config_name: default\n---\n# the hub's own card\n"
    repos = {("dataset", "org/ds"): {"README.md": card, "data/test.parquet": hub_bytes}}
    m = hub_manifest(tmp_path, mirror_bytes, rows)
    with LoopbackHub(repos) as hub:
        r = hub_data(tmp_path, hub.endpoint, m)
        assert r.returncode == 0, r.stderr
        lock = json.loads((tmp_path / "lock.json").read_text())["folders"]["hf/org/ds"]
        assert lock["revision"] == "main" and lock["commit"] == hub.commit(("dataset", "org/ds"), "main")
        assert lock["inputs"]["README.md"] == hashlib.sha256(card).hexdigest()
        assert (tmp_path / "data/hf/org/ds/data/test.parquet").read_bytes() == hub_bytes
        repos[("dataset", "org/ds")]["README.md"] = card + b"changed\n"
        (tmp_path / "data/hf/org/ds/README.md").unlink()
        r = hub_data(tmp_path, hub.endpoint, m)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "hf/org/ds/README.md" in lines[0] and "data lock" in lines[0], r.stderr
    assert not (tmp_path / "data/hf/org/ds/README.md").exists()


def test_hub_parquet_with_other_rows_is_refused(tmp_path):
    from helpers.loopback_hub import LoopbackHub

    rows = [{"q": "Is it?", "a": 1}]
    mirror_bytes = parquet_bytes(rows, tmp_path)
    repos = {
        ("dataset", "org/ds"): {"README.md": b"x", "data/test.parquet": parquet_bytes([{"q": "No", "a": 1}], tmp_path)}
    }
    with LoopbackHub(repos) as hub:
        r = hub_data(tmp_path, hub.endpoint, hub_manifest(tmp_path, mirror_bytes, rows))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "hf/org/ds/data/test.parquet" in r.stderr and "rows" in r.stderr and "nothing kept" in r.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "lock.json").exists()


def test_bad_raw_base_and_bad_lock_are_one_line(tmp_path):
    r = peeval_data(tmp_path, None, "--folders", "local/books", env={"PEEVAL_DATA_RAW_BASE": "ftp://example"})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "PEEVAL_DATA_RAW_BASE='ftp://example': an http(s) URL" in r.stderr and not (tmp_path / "data").exists()
    (tmp_path / "data.lock.json").write_text('{"format": 2}')
    with LoopbackRaw(served()) as raw:
        r = peeval_data(tmp_path, raw, "--folders", "local/books")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "data lock" in r.stderr and "format: 1" in r.stderr and not (tmp_path / "data").exists()


def test_raw_base_credentials_are_never_printed_and_query_or_fragment_refused(monkeypatch):
    """Issue 56: `PEEVAL_DATA_RAW_BASE=http://user:secret@host` was accepted and its error line printed the
    password; `?query#frag` was accepted (it lands inside every file's path)."""
    import huggingface_hub.constants

    from peeval.data import rebuild as data_rebuild
    from peeval.data.lock import DataError

    monkeypatch.setenv("PEEVAL_DATA_RAW_BASE", "http://user:secret@mirror.example/raw")
    assert data_rebuild.raw_base() == "http://user:secret@mirror.example/raw"  # a private mirror: allowed
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataError) as e:
        data_rebuild.fetch_raw("org/repo", "c0ffee", "a.txt")
    assert "secret" not in str(e.value) and "***@mirror.example/raw/org/repo/c0ffee/a.txt" in str(e.value)
    for bad in ("http://user:secret@mirror.example/raw?token=1", "https://mirror.example/raw#frag"):
        monkeypatch.setenv("PEEVAL_DATA_RAW_BASE", bad)
        with pytest.raises(DataError, match="without \\?query or #fragment") as e:
            data_rebuild.raw_base()
        assert "secret" not in str(e.value)


def test_malformed_book_list_is_one_line(tmp_path):
    m = json.loads(manifest(tmp_path).read_text())
    m["folders"]["local/books"]["source"]["splits"]["test"]["books"] = [[7, "pg7.txt", "Tiny"]]
    (tmp_path / "bad.json").write_text(json.dumps(m))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))} | {"PYTHONPATH": REPO}
    cmd = [sys.executable, "-m", "peeval.cli", "data", "--root", str(tmp_path / "data"), "--manifest"]
    r = subprocess.run([*cmd, str(tmp_path / "bad.json")], cwd=tmp_path, env=e, capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "local/books.source.splits.test.books: a non-empty list of [e-book number" in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(not (MIRROR / "local" / "gutenberg-train").is_dir(), reason="no data mirror to serve")
def test_leaderboard_smoke_from_loopback_public_sources(tmp_path):
    """Issue 45, done-when: a fresh copy with no ../shared beside it, only a loopback hub (the tokenizer at its
    pinned revision) and a loopback raw-file server (the Gutenberg books and Stacks files, made from the mirror:
    public_copies): `make leaderboard PROFILE=smoke` rebuilds every folder, runs end to end, and the store's
    task_data names the source and commit of every corpus a task read."""
    import duckdb
    import yaml
    from helpers.loopback_hub import LoopbackHub
    from helpers.worktree import copy_working_tree

    from peeval.data.sources import load_manifest

    work = copy_working_tree(tmp_path / "clone" / "repo")
    assert not (work.parent / "shared").exists()
    entries = load_manifest()
    folders = yaml.safe_load((Path(REPO) / "params/smoke.yaml").read_text())["data"]["mirror"]
    repos, raw_files = public_copies(entries, folders)
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PEEVAL_DATA"))}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(work), "HF_HOME": str(tmp_path / "hf-home"),
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    subprocess.run([str(venv / "bin" / "dvc"), "config", "--local", "core.no_scm", "true"], cwd=work, env=env,
                   check=True)  # fmt: skip
    revisions = {"main"} | {e["source"].get("revision", "main") for e in entries.values() if e.get("source")}
    with LoopbackHub(repos, revisions=revisions) as hub, LoopbackRaw(raw_files) as raw:
        make = ["make", "leaderboard", "PROFILE=smoke", f"VENV={venv}", "-o", f"{venv}/.peeval-installed"]
        r = subprocess.run(make, cwd=work, env=env | {"HF_ENDPOINT": hub.endpoint, "PEEVAL_DATA_RAW_BASE": raw.base},
                           capture_output=True, text=True, timeout=3600)  # fmt: skip
    assert r.returncode == 0, f"{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    lock = json.loads((work / "data.lock.json").read_text())["folders"]
    assert sorted(lock) == sorted(folders)
    con = duckdb.connect(str(work / "leaderboard" / "peeval.duckdb"), read_only=True)
    q = (
        "SELECT DISTINCT t.location, t.revision FROM task_data t JOIN runs r USING (run_id) "
        "WHERE t.source = 'mirror' AND r.source = 'local'"
    )  # this run's reads, not the published profiles'
    reads = con.execute(q).fetchall()
    con.close()
    assert reads, "no task read a mirror folder"
    for location, revision in reads:
        src = lock[location]
        assert revision == f"{src['source']}@{src['commit']}", (location, revision)
