"""The known-benign warnings of lm-eval and transformers that ``peeval eval`` hides, listed in one place.

Each is printed on every evaluation, says nothing about the run, and has been checked to be harmless for peeval's
models; ``peeval eval -v`` shows them all again (nothing else is hidden: an unlisted warning always prints).
"""

from __future__ import annotations

import logging
import warnings

#: (logger, a part of the message, why it is benign here)
BENIGN_LOGS = (
    ("lm_eval.api.task", "Custom kwargs can be passed",
     "a two-line hint on every custom-dataset task; peeval's tasks read --metadata already"),
    ("lm_eval.models.huggingface", "HF model type is neither marked as CausalLM",
     "peeval's model_type is registered with transformers' auto classes but not in lm-eval's list; causal is right"),
    ("transformers.distributed.tensor_parallel", "The following layers were not sharded",
     "transformers checks a tensor-parallel plan on load; one process holds every layer, none is sharded"),
)  # fmt: skip
#: (category, message regex, module regex) of Python warnings, as ``warnings.filterwarnings`` takes them
BENIGN_WARNINGS = ((DeprecationWarning, r"Use TaskManager\.load\(\)", r"lm_eval\.tasks"),)


class _Benign(logging.Filter):
    def __init__(self, starts: tuple[str, ...]):
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(part in message for part in self.starts)


def quiet(verbose: bool = False) -> None:
    """Hide the listed messages (idempotent); ``verbose``: hide nothing."""
    if verbose:
        return
    by_logger: dict[str, tuple[str, ...]] = {}
    for name, start, _why in BENIGN_LOGS:
        by_logger[name] = (*by_logger.get(name, ()), start)
    for name, starts in by_logger.items():
        log = logging.getLogger(name)
        if not any(isinstance(f, _Benign) for f in log.filters):
            log.addFilter(_Benign(starts))
    for category, message, module in BENIGN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
