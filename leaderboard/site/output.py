"""Writing the site: the whole folder at once (a temporary sibling swapped in), and only over a folder a build of
the site wrote (its manifest lists every file), never over someone else's files."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from peeval._io import replace_dir

#: written into every site folder: the manifest of the files that build wrote (JSON: ``{"files": [...]}``); the
#: next build replaces the folder only when every file in it is listed there (a file of the user's is never deleted)
MARKER = ".peeval-site"
#: a folder without a manifest (a site built before the manifest existed) is the site's own only when every file
#: in it is one this build writes or a page of a run that may have left the store since (its run id: 16 hex digits)
_OLD_SITE_FILE = re.compile(
    r"^(?:runs/[0-9a-f]{16}\.html|data/(?:samples_|data_|metrics_)?[0-9a-f]{16}\.(?:csv|json)(?:\.gz)?)$"
)


class SiteOutError(Exception):
    """``--out`` names a folder the site may not replace (it holds someone else's files)."""


def _manifest(out: Path) -> set[str] | None:
    """The files the build that wrote ``out`` listed in its manifest; None when it has none (not a site, or one
    built before the manifest: its marker said only who wrote it)."""
    try:
        doc = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    files = doc.get("files") if isinstance(doc, dict) else None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else None


def check_out(out: Path, files: dict[str, str | bytes]) -> None:
    """The site replaces ``out`` whole, so every file in ``out`` must be one a build of the site wrote: listed in
    its manifest (:data:`MARKER`), or, for a folder without one, a file this build writes again or a stale run
    page. A folder with any other file (the user's notes, a store, a page beside the site's) is refused, never
    swapped away: the site deletes only files it wrote."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise SiteOutError(f"--out {out}: exists and is not a folder")
    listed = _manifest(out)
    present = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_symlink() or not p.is_dir())
    if listed is not None:
        foreign = [f for f in present if f not in listed and f != MARKER]
    else:
        foreign = [f for f in present if f not in files and f != MARKER and not _OLD_SITE_FILE.match(f)]
    # a folder is the site's only when it holds (or held) a file of the site: a user's folder, even an empty one,
    # is never swapped away with the rest
    ours = {str(q) for f in (listed if listed is not None else [*files, *present]) for q in Path(f).parents}
    folders = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_dir() and not p.is_symlink())
    foreign += [f"{d}/" for d in folders if d not in ours]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SiteOutError(
            f"--out {out}: holds files the site did not write ({shown}); the site replaces its "
            "folder whole, so give a new or empty folder (or move those files out)"
        )


def write_tree(out: Path, files: dict[str, str | bytes]) -> Path:
    """Write into a temporary sibling folder, then swap it in (no half-built site); the temporary
    folder goes on every failure. The folder's manifest (:data:`MARKER`) lists every file written."""
    out = Path(out)
    manifest = {"written_by": "leaderboard.site (peeval): the files of this build; the next build replaces them",
                "files": sorted([*files, MARKER])}  # fmt: skip
    files = {**files, MARKER: json.dumps(manifest, indent=1) + "\n"}
    check_out(out, files)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for rel, text in files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text, encoding="utf-8")  # .gz: bytes
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "index.html"
