"""Mirror folders rebuilt from public files (``peeval data``): the Stacks project's ``.tex`` sources and
Project Gutenberg's plain-text e-books, fetched by path from a pinned GitHub commit and compiled exactly as
the mirror's READMEs say.

Parquet bytes depend on the pyarrow version, so a rebuilt folder is verified by the hash of its rows
(:func:`rows_sha256`, the manifest's ``rows_sha256`` per split), never by the parquet file's sha256; what a
rebuild wrote is then recorded in the data lock (:mod:`peeval.data.lock`) so that later runs verify it by
sha256 offline. The raw files come from ``$PEEVAL_DATA_RAW_BASE`` (default raw.githubusercontent.com):
``<base>/<org>/<name>/<commit>/<path>``, which a test points at a loopback server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .lock import DataError

RAW_ENV = "PEEVAL_DATA_RAW_BASE"
RAW_DEFAULT = "https://raw.githubusercontent.com"

# ----------------------------------------------------------------------------- Gutenberg cleaning (README steps 1, 3)
#: the line after which a PG e-book's text starts (the marker may be indented in PG's HTML-derived files)
PG_START = re.compile(r"^[ \t]*\*\*\*[ \t]*START OF.*$", re.M | re.I)
#: the first line of what follows the text: the END marker, or the "End of (the) Project Gutenberg ..." line /
#: "The Project Gutenberg Etext of ..." that older files put before it or instead of it
PG_END = re.compile(r"^[ \t]*(\*\*\*[ \t]*END OF|End of (the )?Project Gutenberg|The Project Gutenberg Etext of).*$",
                    re.M | re.I)  # fmt: skip
#: a PG production credit or notice (a paragraph holding one is dropped near the start or end of the text)
PG_NOTICE = re.compile(
    r"^\s*(Produced by|Transcribed from|Scanned)|ccx074@pglaf|ibiblio|pgdp\.net"
    r"|(?i:proofread|\be-?text\b|Project Gutenberg|html version|prepared by)"
)
HEAD_CHARS, TAIL_CHARS, SHORT_PARAGRAPH = 8000, 3000, 2000
_PARAGRAPH_BREAK = re.compile(r"(\n(?:[ \t]*\n)+)")


def clean_gutenberg(raw: bytes) -> str:
    """A PG e-book's text as the mirror keeps it: UTF-8 (BOM dropped), CRLF -> LF; only what lies between the
    START line and the END line; short paragraphs (< 2,000 characters) in the first 8,000 / last 3,000
    characters that are PG credits or notices dropped; blank lines at either end dropped, one final newline."""
    text = raw.decode("utf-8").lstrip("\ufeff").replace("\r\n", "\n")
    if m := PG_START.search(text):
        text = text[m.end() :]
    if m := PG_END.search(text):
        text = text[: m.start()]
    text = text.strip("\n")
    parts = _PARAGRAPH_BREAK.split(text)  # paragraph, break, paragraph, ...
    kept, pos = [], 0
    for i in range(0, len(parts), 2):
        para, brk = parts[i], parts[i + 1] if i + 1 < len(parts) else ""
        start, pos = pos, pos + len(para) + len(brk)
        near_edge = start < HEAD_CHARS or start > len(text) - TAIL_CHARS
        if not (near_edge and len(para) < SHORT_PARAGRAPH and PG_NOTICE.search(para)):
            kept.append(para + brk)
    return "".join(kept).strip("\n") + "\n"


# ----------------------------------------------------------------------------- rows, files
def rows_sha256(rows: list[dict]) -> str:
    """The content hash a rebuilt split is verified by: peeval.data.documents_sha256 of its rows in order
    (each row's JSON, keys sorted), the same hash a task's read records."""
    from . import documents_sha256

    return documents_sha256(rows)


def parquet_rows(path: str | os.PathLike) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def git_blob(data: bytes) -> str:
    """The git blob id of a file's bytes (the Stacks rows' ``meta.blob``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def shown(url: str) -> str:
    """``url`` as it may be printed: a user and password in it (a private mirror's), and a ``?query`` or
    ``#fragment`` (a ``?token=``), replaced by ``***``; also for a URL that does not parse."""
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=-1)
    if cut >= 0:
        url = url[:cut] + url[cut] + "***"
    return re.sub(r"^([^/?#]*//)[^/?#]*@", r"\1***@", url)


def raw_base() -> str:
    """``$PEEVAL_DATA_RAW_BASE`` (an http(s) URL without query or fragment, which would land inside every file's
    path; one line when it is not, never echoing a password), else raw.githubusercontent.com."""

    base = os.environ.get(RAW_ENV) or RAW_DEFAULT
    try:
        parts = urllib.parse.urlsplit(base)
        _ = parts.port  # a port that is no number raises here
    except ValueError:
        parts = None
    if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname or "?" in base or "#" in base
            or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", base)):  # fmt: skip
        raise DataError(f"{RAW_ENV}={shown(base)!r}: an http(s) URL without ?query or #fragment (the raw files' "
                        f"base, e.g. {RAW_DEFAULT})")  # fmt: skip
    return base


def fetch_raw(repo: str, commit: str, path: str) -> bytes:
    """One file of ``repo`` at ``commit`` over HTTPS; a failure is one line naming the URL. Offline
    (``HF_HUB_OFFLINE``, as for the hub) nothing is requested."""
    from huggingface_hub import constants

    url = f"{raw_base().rstrip('/')}/{repo}/{commit}/{path}"
    if constants.HF_HUB_OFFLINE:
        raise DataError(f"cannot download {shown(url)}: offline (HF_HUB_OFFLINE is set)")
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.read()
    except (urllib.error.URLError, OSError, ValueError) as e:
        why = " ".join(str(e).split()).replace(url, shown(url))[:200]
        raise DataError(f"cannot download {shown(url)}: {why}") from None


# ----------------------------------------------------------------------------- the two corpora
def stacks_rows(src: dict, split: str, get) -> list[dict]:
    """One row per ``.tex`` file (its text unmodified, proof-pile's ``meta`` JSON), in the manifest's order."""
    repo, commit = src["repo"], src["commit"]
    rows = []
    for name in src["splits"][split]["files"]:
        data = get(name)
        meta = {"set_name": "stacks-project", "source": repo, "file": name,
                "url": f"https://github.com/{repo}/blob/{commit}/{name}", "commit": commit, "blob": git_blob(data),
                "license": src["license"]}  # fmt: skip
        rows.append({"text": data.decode("utf-8"), "meta": json.dumps(meta)})
    return rows


def gutenberg_rows(src: dict, split: str, get) -> list[dict]:
    """One row per e-book ``[number, path, short_book_title, publication_date]`` of the manifest, PG-19's columns."""
    books = src["splits"][split]["books"]
    return [{"short_book_title": title, "publication_date": year, "url": f"http://www.gutenberg.org/ebooks/{number}",
             "text": clean_gutenberg(get(path))} for number, path, title, year in books]  # fmt: skip


BUILDS = {"stacks": stacks_rows, "gutenberg": gutenberg_rows}


def split_problem(src: dict, spec: dict) -> str | None:
    """What a manifest split of a rebuilt source lacks (``<key>: <what is allowed>``), or None."""
    if src["build"] == "stacks":
        names = spec.get("files")
        ok = isinstance(names, list) and names and all(isinstance(n, str) and n for n in names)
        return None if ok else "files: a non-empty list of file paths in the repository"
    books = spec.get("books")
    ok = isinstance(books, list) and books and all(
        isinstance(b, list) and len(b) == 4 and type(b[0]) is int and isinstance(b[1], str) and b[1]
        and isinstance(b[2], str) and type(b[3]) is int for b in books
    )  # fmt: skip
    return None if ok else "books: a non-empty list of [e-book number, path, short_book_title, publication_date]"


SCHEMAS = {"stacks": (("text", "string"), ("meta", "string")),
           "gutenberg": (("short_book_title", "string"), ("publication_date", "int32"), ("url", "string"),
                         ("text", "string"))}  # fmt: skip


def rebuild(rel: str, src: dict, out: Path, get=None) -> dict[str, str]:
    """Build the folder into ``out`` (parquet per split + a README declaring the splits), each split's rows
    verified against the manifest's ``rows_sha256``. Returns the sha256 of every raw input file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    inputs: dict[str, str] = {}

    def fetched(path: str) -> bytes:
        try:
            data = (get or (lambda p: fetch_raw(src["repo"], src["commit"], p)))(path)
        except DataError as e:
            raise DataError(f"{rel}: {e}") from None
        inputs[path] = hashlib.sha256(data).hexdigest()
        return data

    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in SCHEMAS[src["build"]]])
    configs = []
    for split, spec in src["splits"].items():
        try:
            rows = BUILDS[src["build"]](src, split, fetched)
        except UnicodeDecodeError as e:
            raise DataError(f"{rel}: a file of {src['repo']}@{src['commit'][:12]} is not UTF-8 ({e})") from None
        digest = rows_sha256(rows)
        if digest != spec["rows_sha256"]:
            where = f"{src['repo']}@{src['commit'][:12]}"
            raise DataError(
                f"{rel}/{spec['file']}: the {len(rows)} rows rebuilt from {where} "
                f"hash to {digest[:12]}…, the manifest pins {spec['rows_sha256'][:12]}…: nothing kept"
            )
        (out / spec["file"]).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / spec["file"], compression="zstd",
                       compression_level=9)  # fmt: skip
        configs.append(f"  - split: {split}\n    path: {spec['file']}")
    readme = ("---\nconfigs:\n- config_name: default\n  data_files:\n" + "\n".join(configs) + "\n---\n\n"
              f"# {rel}\n\nRebuilt by `peeval data` from {src['repo']}@{src['commit']} as peeval/data/manifest.json "
              "says (rows verified by their sha256); see the data lock for the files it read.\n")  # fmt: skip
    (out / "README.md").write_text(readme, encoding="utf-8")
    return inputs
