"""Stage `data`: check that the offline mirror holds what the pipeline reads, and record a
manifest (file sizes + sha256) so that a changed corpus reruns the stages after it."""

from __future__ import annotations

import hashlib
import json
import os

from common import params
from tqdm import tqdm

from peeval.data import mirror_root


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main() -> None:
    root = mirror_root()
    if root is None or not root.is_dir():
        raise SystemExit("data: no offline data mirror (set PEEVAL_DATA_MIRROR or put it at ../shared/data)")
    manifest = {"mirror": str(root), "folders": {}}
    for rel in params()["data"]["mirror"]:
        d = root / rel
        if not d.is_dir():
            raise SystemExit(f"data: the mirror has no {rel} (looked in {d})")
        files = sorted(p for p in d.rglob("*") if p.is_file())
        manifest["folders"][rel] = {
            str(p.relative_to(d)): {"bytes": p.stat().st_size, "sha256": sha256(p)}
            for p in tqdm(files, desc=f"hash {rel}", leave=False)
        }
    os.makedirs("data", exist_ok=True)
    tmp = "data/manifest.json.tmp"
    with open(tmp, "w") as fh:
        json.dump({"folders": manifest["folders"]}, fh, indent=1, sort_keys=True)
    os.replace(tmp, "data/manifest.json")
    print(f"data: {sum(len(v) for v in manifest['folders'].values())} files from {root}")


if __name__ == "__main__":
    main()
