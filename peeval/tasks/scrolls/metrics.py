"""The official SCROLLS metrics, implemented here (lm-eval's SCROLLS metric is a hub download).

- ``exact_match``: SQuAD-normalised (lower case, punctuation and articles removed, whitespace
  collapsed) string equality — contract_nli, quality;
- ``token_f1``: SQuAD token F1 of the normalised texts — qasper, narrative_qa;
- ``rouge``: ROUGE-1/2/L F-measures with ``rouge_score`` (no stemmer) on texts split into
  sentences and joined by newlines — qmsum, summ_screen_fd, gov_report;

each the max over an example's references; a task's score is the mean over examples x 100, and
for the summarisation tasks the geometric mean of the three ROUGE means.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from peeval.install.extras import require

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
_PUNCT = set(string.punctuation)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower, drop punctuation, drop articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, references: Sequence[str]) -> float:
    return max(float(normalize_answer(prediction) == normalize_answer(r)) for r in references)


def _f1(prediction: str, reference: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, references: Sequence[str]) -> float:
    return max(_f1(prediction, r) for r in references)


def _sentences(text: str) -> str:
    return "\n".join(s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip())


_SCORER = None


def rouge(prediction: str, references: Sequence[str]) -> dict[str, float]:
    """Per ROUGE type, the best F-measure over the references."""
    global _SCORER
    if _SCORER is None:
        require("SCROLLS' ROUGE metric", "rouge_score")
        from rouge_score import rouge_scorer

        _SCORER = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=False)
    pred = _sentences(prediction)
    best = dict.fromkeys(ROUGE_TYPES, 0.0)
    for ref in references:
        scores = _SCORER.score(_sentences(ref), pred)
        for t in ROUGE_TYPES:
            best[t] = max(best[t], scores[t].fmeasure)
    return best


def mean_x100(values: Iterable[float]) -> float:
    values = list(values)
    return 100.0 * sum(values) / len(values) if values else float("nan")


def rouge_geometric_mean(items: Iterable[Sequence[float]]) -> float:
    """``items``: per example (rouge1, rouge2, rougeL); the geometric mean of the three corpus means, x 100."""
    items = list(items)
    if not items:
        return float("nan")
    means = [sum(x[i] for x in items) / len(items) for i in range(len(ROUGE_TYPES))]
    return 100.0 * math.prod(means) ** (1 / len(means))
