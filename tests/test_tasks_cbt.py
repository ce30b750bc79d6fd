"""CBT on a hub-schema fixture (the mirror has none): the requests by hand, accuracy from an
oracle, the CN/NE group mean, and the clear error when the data is nowhere."""

from pathlib import Path

import datasets
import pytest

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
