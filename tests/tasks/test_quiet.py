"""peeval/evaluation/quiet.py (issue 58): the known-benign lm-eval / transformers messages are hidden, each only on its
own
logger, anything else still prints, and ``-v`` (quiet(verbose=True)) hides nothing."""

from __future__ import annotations

import logging

import pytest

from peeval.evaluation import quiet as Q

#: messages as lm-eval and transformers print them (their text, copied from a run's stderr)
SEEN = {
    "lm_eval.api.task": "peeval_ppl_pg19: Custom kwargs can be passed to `--metadata` in console (as json string)",
    "lm_eval.models.huggingface": "HF model type is neither marked as CausalLM or Seq2SeqLM.   This is expected",
    "transformers.distributed.tensor_parallel": "The following layers were not sharded: model.norm.weight",
}


def _remove_filters():
    for name in {n for n, _, _ in Q.BENIGN_LOGS}:
        log = logging.getLogger(name)
        for f in [f for f in log.filters if isinstance(f, Q._Benign)]:
            log.removeFilter(f)


@pytest.fixture
def clean_loggers():
    """No filter before (a `peeval eval` earlier in this process installed them) and none left after."""
    _remove_filters()
    yield
    _remove_filters()


def test_benign_messages_are_hidden_and_others_kept(caplog, clean_loggers):
    assert set(SEEN) == {n for n, _, _ in Q.BENIGN_LOGS}  # every listed message has its sample here
    Q.quiet(verbose=True)  # -v: nothing hidden
    for name, msg in SEEN.items():
        logging.getLogger(name).warning(msg)
    assert [r.getMessage() for r in caplog.records] == list(SEEN.values())
    caplog.clear()
    Q.quiet()
    Q.quiet()  # idempotent: one filter per logger
    for name, msg in SEEN.items():
        logging.getLogger(name).warning(msg)
        logging.getLogger(name).warning("something else went wrong")  # never hidden
    assert [r.getMessage() for r in caplog.records] == ["something else went wrong"] * len(SEEN)
    assert all(sum(isinstance(f, Q._Benign) for f in logging.getLogger(n).filters) == 1 for n in SEEN)
    logging.getLogger("lm_eval.evaluator").warning(SEEN["lm_eval.models.huggingface"])  # only on its own logger
    assert caplog.records[-1].name == "lm_eval.evaluator"
