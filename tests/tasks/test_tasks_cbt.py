"""CBT on a hub-schema fixture (the mirror has none): the requests by hand, accuracy from an
oracle, the CN/NE group mean, and the clear error when the data is nowhere."""

import pytest
from helpers.mirrors import OPTIONS, write_cbt_mirror

pytestmark = pytest.mark.usefixtures("hub_offline")


class _Oracle:
    """Log-likelihood 0 for the continuation naming the gold candidate, -5 for the others."""

    def __new__(cls, seen: list):
        from lm_eval.api.model import LM

        class Oracle(LM):
            def loglikelihood(self, requests, disable_tqdm=False):
                out = []
                for r in requests:
                    seen.append(r.args)
                    i = int(r.args[0].split("of story ")[1].split()[0])
                    gold = OPTIONS[(3 * i + 1) % 10]
                    out.append((0.0 if r.args[1].split()[0] == gold else -5.0, False))
                return out

            def loglikelihood_rolling(self, requests, disable_tqdm=False):
                raise NotImplementedError

            def generate_until(self, requests, disable_tqdm=False):
                raise NotImplementedError

        return Oracle()


def test_cbt_requests_and_accuracy_on_a_fixture(tmp_path, monkeypatch):
    from lm_eval import evaluator
    from lm_eval.tasks import TaskManager

    write_cbt_mirror(tmp_path)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    seen = []
    res = evaluator.simple_evaluate(
        model=_Oracle(seen), tasks=["peeval_cbt"], task_manager=TaskManager(include_defaults=False)
    )
    r = res["results"]
    assert r["peeval_cbt_cn"]["acc,none"] == 1.0 and r["peeval_cbt_ne"]["acc,none"] == 1.0
    assert r["peeval_cbt"]["acc,none"] == 1.0
    assert len(seen) == 2 * 4 * 10  # 10 candidates per question
    story0 = " ".join(f"CN sentence {k} of story 0 ." for k in range(20))
    cn0 = [a for a in seen if a[0].startswith("CN sentence 0 of story 0 ")]
    assert cn0[0][0] == story0 + " Then" and sorted(c for _, c in cn0)[0] == " Ann said hello to story 0 ."
    story1 = " ".join(f"CN sentence {k} of story 1 ." for k in range(20))
    cn1 = [a for a in seen if a[0].startswith("CN sentence 0 of story 1 ")]
    assert cn1[0][0] == story1 and {c for _, c in cn1} == {f" {o} ran home 1 ." for o in OPTIONS}


def test_cbt_without_data_is_one_clear_error(tmp_path, monkeypatch):
    from peeval.tasks.cbt import cbt

    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"dataset 'cam-cst/cbt' \(CN\) is neither in the mirror"):
        cbt.cn()
