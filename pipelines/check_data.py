"""Stage `data`: every mirror folder params.yaml reads (`data.mirror` under `data.root`, and the folders
of the evaluation suites' tasks) verified against the committed manifest (peeval/data/manifest.json:
sizes + sha256), a missing or changed one downloaded, as `peeval data` does
(peeval.data.sources.resolve); then data/manifest.json records the files and where each folder's copy
comes from (sizes and sha256 as they are on disk: a rebuilt folder's parquet differs from the manifest's bytes), so
that a changed corpus reruns the stages after it. DVC itself watches the corpora
(dvc.yaml deps under params.yaml `data.root`)."""

from __future__ import annotations

import json
import sys

from common import params, use_mirror

from peeval._io import atomic_write_text
from peeval.data.sources import DataError, load_manifest, profile_folders, resolve, sha256


def main() -> None:
    root = use_mirror()
    p = params()
    suites = {name: suite.tasks for name, suite in p.eval.suites.items()}
    folders = profile_folders(p.data.mirror, suites, [*p.eval.pretrain, *p.eval.adapt, *p.eval.base])
    try:
        sources, problems = resolve(root, folders, log=lambda m: print(f"data: {m}"))
    except DataError as e:
        problems = [str(e)]
    for line in problems:
        print(f"data: error: {line}", file=sys.stderr)
    if problems:
        raise SystemExit(2)
    entries = load_manifest()
    record = {
        # the files as they are: the manifest's, or (a rebuilt or unpinned download) those the data lock records
        "folders": {rel: {name: {"bytes": (root / rel / name).stat().st_size, "sha256": sha256(root / rel / name)}
                          for name in entries[rel]["files"] if (root / rel / name).is_file()} for rel in folders},
        "sources": sources,
    }  # fmt: skip
    atomic_write_text("data/manifest.json", json.dumps(record, indent=1, sort_keys=True))
    print(f"data: {sum(len(v) for v in record['folders'].values())} files from {root}")


if __name__ == "__main__":
    main()
