"""peeval eval runs lm-eval's bootstrap stderr in one process (DISABLE_MULTIPROC): a Pool forked from a process
holding torch's threads hung a CI run. The single-process path must give the same numbers as the Pool."""

import math
import os
import random

from lm_eval.api import metrics


def test_single_process_bootstrap_equals_the_pool(monkeypatch):
    rnd = random.Random(0)
    xs = [rnd.random() for _ in range(50)]
    f = metrics.mean
    monkeypatch.delenv("DISABLE_MULTIPROC", raising=False)
    pooled = metrics.bootstrap_stderr(f, xs, 3000)
    monkeypatch.setenv("DISABLE_MULTIPROC", "1")
    single = metrics.bootstrap_stderr(f, xs, 3000)
    assert single == pooled
    by_hand = math.sqrt(sum((x - sum(xs) / 50) ** 2 for x in xs) / 49 / 50)  # the mean's standard error
    assert abs(single - by_hand) < 0.15 * by_hand  # a bootstrap of the mean: near its closed form
    assert os.environ.get("DISABLE_MULTIPROC") == "1"
