"""SCROLLS: official metrics against hand-computed values, grouping by id, question-last prompts,
the mirror's row counts, a hub-schema fixture for a task the mirror lacks, and the clear error."""

import math
from pathlib import Path

import datasets
import pytest
from helpers.data_mirror import needs_mirror

from peeval.tasks.scrolls import metrics, scrolls

pytestmark = pytest.mark.usefixtures("hub_offline")


def test_squad_normalisation_exact_match_and_f1_by_hand():
    assert metrics.normalize_answer("  The Cat,  sat!  an apple") == "cat sat apple"
    assert metrics.exact_match("the cat.", ["A  Cat"]) == 1.0
    assert metrics.exact_match("Not mentioned", ["Entailment", "not mentioned"]) == 1.0
    assert metrics.exact_match("cat", ["dog"]) == 0.0
    # pred {cat, sat, on, mat} vs ref {cat, sat}: P = 2/4, R = 2/2, F1 = 2/3
    assert metrics.token_f1("cat sat on the mat", ["the cat sat"]) == pytest.approx(2 / 3)
    # max over references: "dog" gives 0, "mat" gives P 1/4 R 1 -> 0.4
    assert metrics.token_f1("cat sat on mat", ["dog", "mat"]) == pytest.approx(0.4)
    assert metrics.token_f1("", ["cat"]) == 0.0


def test_rouge_by_hand():
    # pred "cat sat on mat" vs ref "cat sat here": unigrams 2 common -> P 1/2, R 2/3, F 4/7;
    # bigrams {cat sat} common of 3 and 2 -> P 1/3, R 1/2, F 2/5; LCS "cat sat" = 2 -> 4/7
    r = metrics.rouge("cat sat on mat", ["dog", "cat sat here"])
    assert (
        r["rouge1"] == pytest.approx(4 / 7)
        and r["rouge2"] == pytest.approx(0.4)
        and r["rougeL"] == pytest.approx(4 / 7)
    )
    # sentence splitting does not change ROUGE-1/2/L; the max is taken per type over references
    r = metrics.rouge("On mat. Cat sat!", ["on mat cat", "mat cat sat"])
    assert r["rouge1"] == pytest.approx(1.0 * 2 * 3 / 4 / (3 / 4 + 1))  # ref 2: 3 of 4 / 3 of 3 -> 6/7
    assert r["rouge2"] == pytest.approx(2 / 3 * 2 / (2 / 3 + 1) * 1 / 1)  # ref 1 "on mat","mat cat": 2 of 3 / 2 of 2
    # geometric mean of the corpus means, x100
    items = [(0.5, 0.2, 0.4), (0.3, 0.0, 0.2)]
    assert metrics.rouge_geometric_mean(items) == pytest.approx(100 * (0.4 * 0.1 * 0.3) ** (1 / 3))
    assert metrics.mean_x100([1.0, 0.0, 0.5]) == pytest.approx(50.0)
    assert math.isnan(metrics.mean_x100([]))


def test_split_input_and_prompts():
    q, d = scrolls.split_input("quality", "Why?\n\n(A) x\n(B) y\n(C) z\n(D) w\n\nThe article.\n\nMore.")
    assert q == "Why?\n\n(A) x\n(B) y\n(C) z\n(D) w" and d == "The article.\n\nMore."
    q, d = scrolls.split_input("contract_nli", "Hyp text.\n\nDoc body\n\npart 2")
    assert (q, d) == ("Hyp text.", "Doc body\n\npart 2")
    assert scrolls.split_input("gov_report", "Report\n\nbody") == ("", "Report\n\nbody")
    assert scrolls.make_prompt("contract_nli", "H", "D") == "D\n\nHypothesis: H\nConclusion:"
    assert scrolls.make_prompt("gov_report", "", "D").endswith(
        "\n\nQuestion: What is a summary of the preceding text?\nAnswer:"
    )
    assert scrolls.make_prompt("qasper", "Q?", "D") == "D\n\nQuestion: Q?\nAnswer:"


def _scrolls_mirror(root: Path, name: str, rows: list[dict]) -> None:
    folder = root / "hf" / "tau" / "scrolls"
    (folder / name).mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(folder / name / "validation-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        f"---\nconfigs:\n- config_name: {name}\n  data_files:\n  - split: validation\n"
        f"    path: {name}/validation-*.parquet\n---\n"
    )


class _Echo:
    """An lm-eval LM that generates a fixed answer per prompt (found by its question)."""

    def __new__(cls, answers: dict[str, str], seen: list):
        from lm_eval.api.model import LM

        class Echo(LM):
            def generate_until(self, requests, disable_tqdm=False):
                out = []
                for r in requests:
                    seen.append(r.args)
                    out.append(next(a for q, a in answers.items() if r.args[0].endswith(f"Question: {q}\nAnswer:")))
                return out

            def loglikelihood(self, requests, disable_tqdm=False):
                raise NotImplementedError

            def loglikelihood_rolling(self, requests, disable_tqdm=False):
                raise NotImplementedError

        return Echo()


def _evaluate(name, lm, limit=None):
    from lm_eval import evaluator
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_defaults=False)
    return evaluator.simple_evaluate(model=lm, tasks=[name], task_manager=tm, limit=limit)["results"][name]


def test_qasper_fixture_one_generation_per_id_max_over_references(tmp_path, monkeypatch):
    doc = "Paper text. " * 5
    rows = [
        {"id": "q1", "pid": "q1_0", "input": f"What data?\n\n{doc}", "output": "the Penn Treebank"},
        {"id": "q1", "pid": "q1_1", "input": f"What data?\n\n{doc}", "output": "wikipedia dumps"},
        {"id": "q2", "pid": "q2_0", "input": f"Which model?\n\n{doc}", "output": "an LSTM tagger"},
    ]
    _scrolls_mirror(tmp_path, "qasper", rows)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    seen = []
    # q1: exactly reference 2 (F1 1); q2: "LSTM" vs "an LSTM tagger" -> P 1, R 1/2, F1 2/3
    res = _evaluate("peeval_scrolls_qasper", _Echo({"What data?": " Wikipedia dumps", "Which model?": "LSTM"}, seen))
    assert len(seen) == 2  # one generation per id
    assert seen[0][0] == f"{doc.strip()}\n\nQuestion: What data?\nAnswer:"
    assert seen[0][1]["max_gen_toks"] == 128 and seen[0][1]["until"] == ["\n"] and seen[0][1]["do_sample"] is False
    assert res["f1,none"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert res["scrolls_score,none"] == res["f1,none"]


def test_summary_fixture_scores_geometric_mean(tmp_path, monkeypatch):
    rows = [{"id": "g1", "pid": "g1_0", "input": "Long report body.", "output": "cat sat here"}]
    _scrolls_mirror(tmp_path, "gov_report", rows)
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path))
    seen = []
    res = _evaluate(
        "peeval_scrolls_gov_report", _Echo({"What is a summary of the preceding text?": "cat sat on mat"}, seen)
    )
    assert seen[0][0] == "Long report body.\n\nQuestion: What is a summary of the preceding text?\nAnswer:"
    assert res["rouge1,none"] == pytest.approx(400 / 7) and res["rouge2,none"] == pytest.approx(40.0)
    assert res["rouge_gm,none"] == pytest.approx(100 * ((4 / 7) * 0.4 * (4 / 7)) ** (1 / 3))


@needs_mirror("hf", "tau", "scrolls")
def test_mirror_counts_by_id(monkeypatch, data_mirror):
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(data_mirror))
    counts = {n: len(scrolls.build_dataset(n)["validation"]) for n in ("qmsum", "contract_nli", "quality")}
    assert counts == {"qmsum": 272, "contract_nli": 34, "quality": 6}  # the mirror README's distinct ids
    q = scrolls.build_dataset("quality")["validation"][0]
    assert q["prompt"].endswith("(D) 1 hour\nAnswer:") and q["outputs"] == ["10 hours"]


@needs_mirror("hf", "tau", "scrolls")
def test_unmirrored_task_offline_is_a_clear_error(hub_offline, tmp_path, monkeypatch, data_mirror):
    """Neither the mirror nor the hub copy (SCROLLS' zip files, test_hub_copies.py) within reach."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(data_mirror))
    with pytest.raises(FileNotFoundError, match=r"dataset 'tau/scrolls' \(narrative_qa\) is neither in the mirror"):
        scrolls.build_dataset("narrative_qa")
