"""Stage `data`: check that the offline mirror holds what the pipeline reads, and record a
manifest (file sizes + sha256) so that a changed corpus reruns the stages after it. DVC itself
watches the mirror folders (dvc.yaml deps under params.yaml `data.root`)."""

from __future__ import annotations

import hashlib
import json

from common import params, use_mirror
from tqdm import tqdm

from peeval._io import atomic_write_text


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main() -> None:
    root = use_mirror()
    if not root.is_dir():
        raise SystemExit(f"data: no offline data mirror at {root} (params.yaml data.root; SPEC section 8)")
    manifest = {"mirror": str(root), "folders": {}}
    for rel in params().data.mirror:
        d = root / rel
        if not d.is_dir():
            raise SystemExit(f"data: the mirror has no {rel} (looked in {d})")
        files = sorted(p for p in d.rglob("*") if p.is_file())
        manifest["folders"][rel] = {
            str(p.relative_to(d)): {"bytes": p.stat().st_size, "sha256": sha256(p)}
            for p in tqdm(files, desc=f"hash {rel}", leave=False)
        }
    atomic_write_text("data/manifest.json", json.dumps({"folders": manifest["folders"]}, indent=1, sort_keys=True))
    print(f"data: {sum(len(v) for v in manifest['folders'].values())} files from {root}")


if __name__ == "__main__":
    main()
