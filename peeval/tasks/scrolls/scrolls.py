"""``peeval_scrolls_<name>``: the SCROLLS validation sets (``tau/scrolls``) with the official metrics.

The hub has one row per (input, reference): rows are grouped by ``id`` (first-seen order) and
each id is generated for once, scored against all its references (max over references).
A SCROLLS ``input`` is ``<query>\\n\\n<document>`` (quality: question and options, then the
article; summ_screen_fd and gov_report: the document only). The prompt puts the document
first and the query with a short answer cue last (lm-eval's own SCROLLS prompts):

    <document>\\n\\nQuestion: <query>\\nAnswer:          (qasper, narrative_qa, quality, qmsum)
    <document>\\n\\nHypothesis: <query>\\nConclusion:    (contract_nli)
    <document>\\n\\nQuestion: What is a summary of the preceding text?\\nAnswer:   (summaries)

so that lm-eval's left truncation of a prompt longer than ``max_length - max_gen_toks`` cuts the
document, never the question. Greedy generation, per-task ``max_gen_toks`` in the YAMLs.
Metrics (x100): ``em`` (contract_nli, quality), ``f1`` (qasper, narrative_qa),
``rouge1``/``rouge2``/``rougeL`` and their geometric mean ``rouge_gm`` (qmsum, summ_screen_fd,
gov_report); ``scrolls_score`` is the task's headline metric, averaged by the group.

The data: the mirror first (``peeval.data``), else SCROLLS' own zip files on the hub read with the ``json``
builder (``HUB_COPIES``; lm-eval PR #3975), since ``datasets`` 5 refuses the repository's loading script.
``hub_copy: tau/scrolls@<commit>`` pins another commit and reads the hub even where the mirror has the task.
"""

from __future__ import annotations

import datasets
from lm_eval.api.task import ConfigurableTask

from peeval.data import HUB_COPIES
from peeval.registry import SCROLLS_TASKS
from peeval.tasks.metadata_keys import check_keys, chosen_copy
from peeval.tasks.scrolls import metrics

#: name -> (metric kind, whether ``input`` starts with a query): the registry's (claims read it torch-free)
TASKS = SCROLLS_TASKS
SUMMARY_QUESTION = "What is a summary of the preceding text?"


def split_input(name: str, text: str) -> tuple[str, str]:
    """(query, document) of a SCROLLS ``input``."""
    if not TASKS[name][1]:
        return "", text.strip()
    start = text.find("(D)") if name == "quality" else 0
    sep = text.find("\n\n", max(start, 0))
    if sep < 0:
        raise ValueError(f"tau/scrolls {name}: an input without the '\\n\\n' query separator")
    return text[:sep].strip(), text[sep + 2 :].strip()


def make_prompt(name: str, query: str, document: str) -> str:
    if name == "contract_nli":
        return f"{document}\n\nHypothesis: {query}\nConclusion:"
    return f"{document}\n\nQuestion: {query or SUMMARY_QUESTION}\nAnswer:"


def group_by_id(rows: datasets.Dataset) -> list[dict]:
    """One example per ``id`` with every reference output (the hub repeats the input per reference)."""
    docs: dict[str, dict] = {}
    for r in rows:
        d = docs.setdefault(r["id"], {"id": r["id"], "input": r["input"], "outputs": []})
        d["outputs"].append(r["output"])
    return list(docs.values())


def build_dataset(scrolls_task: str, split: str = "validation", **metadata) -> datasets.DatasetDict:
    from peeval.data import load_dataset

    chosen = chosen_copy(f"peeval_scrolls_{scrolls_task}", "scrolls", metadata)
    copy = chosen or HUB_COPIES["scrolls"]["tau/scrolls"]
    rows = load_dataset("tau/scrolls", scrolls_task, split=split, copy=copy, mirror=chosen is None)
    docs = []
    for d in group_by_id(rows):
        query, document = split_input(scrolls_task, d["input"])
        docs.append({**d, "query": query, "prompt": make_prompt(scrolls_task, query, document)})
    return datasets.DatasetDict({split: datasets.Dataset.from_list(docs)})


class ScrollsTask(ConfigurableTask):
    """Greedy generation scored by the task's official SCROLLS metric."""

    def __init__(self, config=None, **kwargs):
        super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

    @property
    def kind(self) -> str:
        return TASKS[self.config.metadata["scrolls_task"]][0]

    def process_results(self, doc, results):
        pred, refs = results[0].strip(), doc["outputs"]
        if self.kind == "em":
            s = metrics.exact_match(pred, refs)
            return {"em": s, "scrolls_score": s}
        if self.kind == "f1":
            s = metrics.token_f1(pred, refs)
            return {"f1": s, "scrolls_score": s}
        r = metrics.rouge(pred, refs)
        triple = tuple(r[t] for t in metrics.ROUGE_TYPES)
        return {**r, "rouge_gm": triple, "scrolls_score": triple}

    def aggregation(self):
        if self.kind == "rouge":
            agg = dict.fromkeys(metrics.ROUGE_TYPES, metrics.mean_x100)
            return {**agg, "rouge_gm": metrics.rouge_geometric_mean, "scrolls_score": metrics.rouge_geometric_mean}
        return {self.kind: metrics.mean_x100, "scrolls_score": metrics.mean_x100}

    def higher_is_better(self):
        return dict.fromkeys(self.aggregation(), True)


def _builder(name: str):
    def build(**metadata):
        check_keys(f"peeval_scrolls_{name}", metadata)
        metadata.pop("scrolls_task", None)
        return build_dataset(name, **metadata)

    build.__name__ = name
    return build


qasper, narrative_qa, quality, contract_nli, qmsum, summ_screen_fd, gov_report = map(_builder, TASKS)
