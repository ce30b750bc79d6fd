"""Issue 66 item 12: the aggregate check covered acc, ppl, bpb and tokens only, so any other metric of a results.json
that disagreed with its samples was ingested and shown. Now every metric is recomputed from the rows it came from (its
samples' per-sample items by the task's own aggregation, a group's from its members), or the run is refused in one
line. The runs here are copies of the published cpu-claims runs, edited one number at a time."""

import json
import math
import random
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from leaderboard.ingest import IngestError, ingest

PUBLISHED = Path(REPO) / "leaderboard" / "published" / "cpu-claims" / "results"
ZEROSHOT = "base/zeroshot_tasks"


def copy_run(tmp_path: Path, rel: str) -> Path:
    """The published run ``rel`` and its checkpoint's summaries, laid out as in the repository that made them."""
    run = tmp_path / "results" / rel
    shutil.copytree(PUBLISHED / rel, run)
    ck = json.loads((run / "results.json").read_text())["peeval"].get("checkpoint")
    if ck and (PUBLISHED.parent / ck).is_dir() and not (tmp_path / ck).exists():
        shutil.copytree(PUBLISHED.parent / ck, tmp_path / ck)
    return run


def ingest_here(tmp_path: Path, runs, db: str = "s.duckdb"):
    return ingest(list(runs), tmp_path / db, root=tmp_path)


def edit_result(run: Path, task: str, key: str, change) -> None:
    doc = json.loads((run / "results.json").read_text())
    doc["results"][task][key] = change(doc["results"][task][key])
    (run / "results.json").write_text(json.dumps(doc))


def first_run(pattern: str) -> str:
    return next(p.parent.relative_to(PUBLISHED).as_posix() for p in sorted(PUBLISHED.glob(pattern)))


CASES = [  # (run, task, results key): a metric that is neither a share of `correct` nor a perplexity cell
    (ZEROSHOT, "peeval_hellaswag", "acc_norm,none"),
    (ZEROSHOT, "lambada_openai", "perplexity,none"),
    (ZEROSHOT, "piqa", "acc_norm,none"),
    ("base/zeroshot_groups", "mmlu_stem", "acc,none"),  # a group: from its members
    ("base/zeroshot_groups", "blimp", "acc,none"),
]


def test_the_published_runs_ingest_as_they_are(tmp_path):
    for rel in {c[0] for c in CASES} | {first_run("diag/*flip_flop*/**/results.json")}:
        copy_run(tmp_path, rel)
    assert ingest_here(tmp_path, [tmp_path / "results"])["runs"] > 0


@pytest.mark.parametrize("case", CASES + ["read_acc", "rouge_gm", "nll_pos", "acc@cell"], ids=str)
def test_a_metric_its_rows_do_not_give_is_refused(tmp_path, case):
    if case == "read_acc":
        rel, key = first_run("diag/*flip_flop*/**/results.json"), "read_acc,none"
        task = "peeval_diag_flip_flop_test"
    elif case == "rouge_gm":
        rel, task, key = first_run("**/samples_peeval_scrolls_qmsum.jsonl"), "peeval_scrolls_qmsum", "rouge_gm,none"
    elif case == "nll_pos":
        rel, task, key = (
            first_run("pretrain/*/ppl/samples_peeval_ppl_pg19.jsonl"),
            "peeval_ppl_pg19",
            "nll_pos@128,none",
        )
    elif case == "acc@cell":
        rel, task, key = first_run("diag/*addition*/**/results.json"), "peeval_diag_addition_test", "acc@1x1,none"
    else:
        rel, task, key = case
    run = copy_run(tmp_path, rel)
    edit_result(run, task, key, lambda v: v * 0.9 + 0.01)  # a different, still plausible number
    with pytest.raises(IngestError, match=f"{task} {key.split(',')[0]} is .*give"):
        ingest_here(tmp_path, [run])
    assert not (tmp_path / "s.duckdb").exists()


def test_a_metric_no_sample_holds_is_refused(tmp_path):
    """The samples list other metrics than the results report: the reported one has no rows behind it."""
    run = copy_run(tmp_path, ZEROSHOT)
    f = run / "samples_peeval_hellaswag.jsonl"
    lines = []
    for line in f.read_text().splitlines():
        s = json.loads(line)
        s["metrics"] = ["acc"]
        s.pop("acc_norm")
        lines.append(json.dumps(s))
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(IngestError, match="peeval_hellaswag acc_norm: no sample holds it"):
        ingest_here(tmp_path, [run])


def test_a_task_without_samples_is_refused(tmp_path):
    """Plain lm_eval's results file (results_<date>.json beside samples_<task>_<date>.jsonl) one of whose samples
    files was deleted: nothing accounts for that task's numbers. (Results of a peeval that did not yet record its
    samples files are read as before: the published shift-stability runs.)"""
    run = copy_run(tmp_path, ZEROSHOT)
    doc = json.loads((run / "results.json").read_text())
    doc.pop("peeval")
    date = "2026-11-29T04-00-00.000000"
    (run / "results.json").unlink()
    (run / f"results_{date}.json").write_text(json.dumps(doc))
    for f in run.glob("samples_*.jsonl"):
        f.rename(run / f"{f.stem}_{date}.jsonl")
    assert ingest_here(tmp_path, [run], "ok.duckdb")["runs"] == 1  # as lm_eval wrote it
    (run / f"samples_piqa_{date}.jsonl").unlink()
    with pytest.raises(IngestError, match="piqa acc.*no samples of piqa"):
        ingest_here(tmp_path, [run])


def test_each_rule_is_the_tasks_own_aggregation():
    """The recompute rules against the tasks' aggregation functions on random items (float64, exact)."""
    from lm_eval.api.metrics import bits_per_byte, mean, perplexity, weighted_perplexity

    from peeval.records.aggregate import recompute
    from peeval.tasks.ppl.ppl import _bpb, _mean_nll, _ppl
    from peeval.tasks.scrolls.metrics import mean_x100, rouge_geometric_mean

    rng = random.Random(0)
    pairs = [(-rng.uniform(1, 900), rng.randint(1, 512)) for _ in range(37)]
    lls = [-rng.uniform(0, 9) for _ in range(41)]
    bits = [float(rng.random() < 0.4) for _ in range(53)]
    triples = [tuple(rng.random() for _ in range(3)) for _ in range(11)]
    reads = [[float(rng.random() < 0.7) for _ in range(rng.randint(1, 9))] for _ in range(13)]
    cases = [
        ("peeval_ppl_pg19", "ppl@512", pairs, _ppl(pairs)),
        ("peeval_ppl_pg19", "bpb@512", pairs, _bpb(pairs)),
        ("peeval_ppl_pg19", "nll_pos@128", [(-a, b) for a, b in pairs], _mean_nll([(-a, b) for a, b in pairs])),
        ("peeval_ppl_pg19", "tokens@512", [b for _, b in pairs], sum(b for _, b in pairs)),
        ("wikitext", "word_perplexity", pairs, weighted_perplexity(pairs)),
        ("wikitext", "bits_per_byte", pairs, bits_per_byte(pairs)),
        ("lambada_openai", "perplexity", lls, perplexity(lls)),
        ("piqa", "acc_norm", bits, mean(bits)),
        ("peeval_scrolls_quality", "em", bits, mean_x100(bits)),
        ("peeval_scrolls_qmsum", "rouge_gm", triples, rouge_geometric_mean(triples)),
        ("peeval_scrolls_qmsum", "rouge1", [t[0] for t in triples], mean_x100([t[0] for t in triples])),
        ("peeval_diag_flip_flop_test", "read_acc", reads, sum(map(sum, reads)) / sum(map(len, reads))),
    ]
    for task, metric, items, want in cases:
        assert math.isclose(recompute(task, metric, items), want, rel_tol=1e-12), (task, metric)


def test_a_metric_without_a_rule_is_not_recomputable():
    from peeval.records.aggregate import NotRecomputable, recompute

    for metric, items in (("mcc", [(1, 0), (0, 0)]), ("acc", [[1.0, 0.0]]), ("ppl@64", [1.0, 2.0])):
        with pytest.raises(NotRecomputable):
            recompute("some_task", metric, items)


def test_shift_stability_logs_its_sequences_and_its_means_are_recomputed(tmp_path, monkeypatch, capsys):
    """Shift stability wrote only means and stderrs: nothing accounted for them. It now writes one sample per
    sequence (samples_peeval_shift_stability.jsonl, listed in peeval.samples_files) and ingest recomputes each mean."""
    import torch
    import transformers
    from conftest import tiny_model

    import peeval.evaluation.shift_stability as S

    class _Tok:
        bos_token_id = 1

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Tok())
    gen = torch.Generator().manual_seed(0)
    monkeypatch.setattr(S, "_sequences", lambda *a, **k: [torch.randint(2, 60, (24,), generator=gen) for _ in range(3)])
    monkeypatch.chdir(tmp_path)
    tiny_model("rope").save_pretrained(tmp_path / "ck")
    assert S.main(["--checkpoint", "ck", "--out", "shift", "--sequences", "3", "--length", "24"]) == 0
    lines = (tmp_path / "shift" / S.SAMPLES_FILE).read_text().splitlines()
    assert len(lines) == 3
    doc = json.loads((tmp_path / "shift" / "results.json").read_text())
    assert doc["peeval"]["samples_files"] == [S.SAMPLES_FILE]
    key = next(k for k in doc["results"][S.TASK] if k.startswith("attn_diff@shift_ids@") and "_stderr" not in k)
    by_hand = sum(json.loads(line)[key.split(",")[0]] for line in lines) / 3
    assert math.isclose(doc["results"][S.TASK][key], by_hand, rel_tol=1e-12)
    assert ingest_here(tmp_path, [tmp_path / "shift"], "ok.duckdb")["runs"] == 1
    edit_result(tmp_path / "shift", S.TASK, key, lambda v: v + 0.5)
    with pytest.raises(IngestError, match=f"{S.TASK} {key.split(',')[0]} is .*its samples give"):
        ingest_here(tmp_path, [tmp_path / "shift"])
