"""lm-eval tasks ``peeval_diag_<task>_<split>`` over the generated diagnostics.

Scoring: one ``loglikelihood`` request (prompt, " " + answer) per example; ``acc`` is lm-eval's
``is_greedy``, i.e. every answer token is the argmax given the prompt and the answer's earlier
tokens. That is exactly "greedy decoding reproduces the answer" for the answer's tokens, in one
forward pass and with no stop-sequence or detokenisation ambiguity (``generate_until`` would
need the model to emit an end marker, which the diagnostics' training does not teach).

Extra metrics: addition ``acc@<len_a>x<len_b>`` per cell (the heatmap); flip-flop ``read_acc``
(every read of the sequence scored, each bit given the true prefix) and ``seq_acc`` (all reads
of the sequence right), the per-read and per-sequence error of Liu et al. being 1 - these.

``--metadata`` keys: ``n`` (examples, default 100; addition test: the grid), ``seed`` (default
1000, distinct from training's seed 0), ``profile`` (cpu|paper) and the generator's parameters
(``generators.params``); unrelated keys are ignored.
"""

from __future__ import annotations

import json

import datasets
from lm_eval.api.instance import Instance
from lm_eval.api.metrics import mean
from lm_eval.api.task import ConfigurableTask

from peeval.records import FLIP_FLOP_METRICS, addition_metric
from peeval.tasks.diagnostics import generators
from peeval.tasks.metadata_keys import check_keys

EVAL_SEED = 1000
EVAL_N = 100


def _options(metadata: dict) -> tuple[str, str, dict]:
    task, split = metadata["diag_task"], metadata["diag_split"]
    allowed = generators.params(task)
    check_keys(f"peeval_diag_{task}", metadata)
    opts = {k: v for k, v in metadata.items() if k in allowed}
    return task, split, opts


def build_dataset(**metadata) -> datasets.DatasetDict:
    task, split, opts = _options(metadata)
    rows = generators.generate(
        task,
        split,
        int(metadata.get("n", EVAL_N)),
        seed=int(metadata.get("seed", EVAL_SEED)),
        profile=metadata.get("profile", "cpu"),
        **opts,
    )
    flat = [{"prompt": r["prompt"], "answer": r["answer"], "meta": json.dumps(r["meta"], sort_keys=True)} for r in rows]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(flat)})


def read_positions(prompt: str) -> list[tuple[str, str]]:
    """Flip-flop: (context up to and including an ``r``, the bit that follows) for every read in the prompt
    (the positions training supervises: ``generators.deterministic_positions``)."""
    toks = prompt.split()
    return [(" ".join(toks[:i]), toks[i]) for i in generators.deterministic_positions("flip_flop", prompt)]


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


class DiagTask(ConfigurableTask):
    """Exact greedy match of the answer; per-cell / per-read metrics where the task has them."""

    def __init__(self, config=None, **kwargs):
        super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

    @property
    def diag_task(self) -> str:
        return self.config.metadata["diag_task"]

    def construct_requests(self, doc, ctx, **kwargs):
        for key in ("apply_chat_template", "chat_template"):
            kwargs.pop(key, None)
        args = [(ctx, " " + doc["answer"])]
        if self.diag_task == "flip_flop":
            args += [(c, " " + bit) for c, bit in read_positions(doc["prompt"])]
        return [
            Instance(request_type="loglikelihood", doc=doc, arguments=a, idx=i, **kwargs) for i, a in enumerate(args)
        ]

    def process_results(self, doc, results):
        hit = float(bool(results[0][1]))
        out = {"acc": hit}
        if self.diag_task == "addition":
            meta = json.loads(doc["meta"])
            out[addition_metric(meta["len_a"], meta["len_b"])] = hit
        if self.diag_task == "flip_flop":
            reads = [float(bool(r[1])) for r in results[1:]] + [hit]
            read_acc, seq_acc = FLIP_FLOP_METRICS
            out[read_acc] = reads
            out[seq_acc] = float(all(reads))
        return out

    def _cells(self) -> list[str]:
        if self.diag_task != "addition":
            return []
        md = self.config.metadata
        p = generators.params("addition", md.get("profile", "cpu"), **_options(md)[2])
        top = 2 * p["n_max"]
        return [addition_metric(a, b) for a in range(1, top + 1) for b in range(1, top + 1)]

    def aggregation(self):
        agg = {"acc": mean, **dict.fromkeys(self._cells(), mean)}
        if self.diag_task == "flip_flop":
            read_acc, seq_acc = FLIP_FLOP_METRICS
            agg.update({read_acc: lambda lists: _mean(x for xs in lists for x in xs), seq_acc: mean})
        return agg

    def higher_is_better(self):
        return dict.fromkeys(self.aggregation(), True)
