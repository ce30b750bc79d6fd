"""Hub-schema dataset fixtures written as a local mirror (used by the task tests of several files)."""

from pathlib import Path

import datasets

OPTIONS = ["Tom", "Ann", "dog", "cat", "boy", "girl", "king", "queen", "fox", "owl"]


def cbt_rows(n: int, tag: str) -> list[dict]:
    rows = []
    for i in range(n):
        answer = OPTIONS[(3 * i + 1) % 10]
        rows.append(
            {
                "sentences": [f"{tag} sentence {k} of story {i} ." for k in range(20)],
                "question": f"Then XXXXX said hello to story {i} ." if i % 2 == 0 else f"XXXXX ran home {i} .",
                "answer": answer,
                "options": OPTIONS,
            }
        )
    return rows


def write_cbt_mirror(root: Path, n: int = 4) -> None:
    folder = root / "hf" / "cam-cst" / "cbt"
    readme = "---\nconfigs:\n"
    for config in ("CN", "NE"):
        (folder / config).mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_list(cbt_rows(n, config)).to_parquet(folder / config / "test-00000-of-00001.parquet")
        readme += f"- config_name: {config}\n  data_files:\n  - split: test\n    path: {config}/test-*.parquet\n"
    (folder / "README.md").write_text(readme + "---\n")


def hellaswag_rows(split: str) -> list[dict]:
    """Rows in the hub schema of ``Rowan/hellaswag`` (label is a string there)."""
    base = [
        ("Removing ice from car", "Then, the man writes over the snow covering the window of a car, and a woman",
         "wearing winter clothes smiles.", "then", ["the man adds wax.", "a woman walks.", "the man scrapes.", "x."]),
        ("Baking cookies", "A woman pours flour into a bowl. [title] She", "mixes it.", "she",
         ["stirs slowly.", "bakes [step] it.", "sings.", "leaves."]),
        ("Personal Care and Style", "[header] How to tie a tie [title] Cross the wide end.", "", "then",
         ["loop it.", "cut it.", "burn it.", "eat it."]),
    ]  # fmt: skip
    return [
        {"ind": i, "activity_label": a, "ctx_a": ca, "ctx_b": cb, "ctx": f"{ca} {cb}", "endings": e,
         "source_id": f"src~{i}", "split": split, "split_type": "indomain", "label": str(i % 4)}
        for i, (a, ca, _x, cb, e) in enumerate(base)
    ]  # fmt: skip


def write_hub_layout(root: Path) -> datasets.DatasetDict:
    dd = datasets.DatasetDict({s: datasets.Dataset.from_list(hellaswag_rows(s)) for s in ("train", "validation")})
    folder = root / "hf" / "Rowan" / "hellaswag"
    if folder.is_symlink() or folder.parent.is_symlink():  # a link into a real mirror: never write there
        raise RuntimeError(f"{folder} leads to {folder.resolve()}: a fixture must not write into a real mirror")
    for split, ds in dd.items():
        (folder / "data").mkdir(parents=True, exist_ok=True)
        ds.to_parquet(folder / "data" / f"{split}-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n"
        "  - split: validation\n    path: data/validation-*\n---\n"
    )
    return dd
