"""``peeval_cbt_cn`` / ``peeval_cbt_ne``: the Children's Book Test (``cam-cst/cbt``, test split).

Each example is 20 context sentences and a 21st sentence with one word replaced by ``XXXXX``;
every one of the 10 candidates is put in the blank and scored as a continuation together with
the rest of that sentence (GPT-2's protocol, as the PoPE paper's zero-shot table follows):

    context      = the 20 sentences + " " + the 21st sentence up to the blank
    continuation = " " + candidate + the rest of the 21st sentence

lm-eval ``multiple_choice``: ``acc`` (highest total log-likelihood) and ``acc_norm``
(per byte). The group ``peeval_cbt`` is the unweighted mean of CN and NE accuracy.
The mirror has no CBT: offline it loads only from a mirror folder made for it, else one error.
"""

from __future__ import annotations

import datasets

from peeval.tasks.metadata_keys import check_keys

BLANK = "XXXXX"


def to_doc(row: dict) -> dict:
    before, after = row["question"].split(BLANK, 1)
    context = " ".join(s.strip() for s in row["sentences"])
    if before.strip():
        context = f"{context} {before.strip()}"
    after = after.rstrip()
    return {
        "context": context,
        "choices": [f"{option}{after}" for option in row["options"]],
        "gold": list(row["options"]).index(row["answer"]),
    }


def build_dataset(config: str, **_metadata) -> datasets.DatasetDict:
    from peeval.data import load_dataset

    test = load_dataset("cam-cst/cbt", config, split="test")
    return datasets.DatasetDict({"test": test.map(to_doc, remove_columns=test.column_names)})


def cn(**metadata):
    check_keys("peeval_cbt_cn", metadata)
    return build_dataset("CN", **metadata)


def ne(**metadata):
    check_keys("peeval_cbt_ne", metadata)
    return build_dataset("NE", **metadata)
