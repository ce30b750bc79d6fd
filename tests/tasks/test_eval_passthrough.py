"""Issue 32 item 4: ``peeval eval`` behaves as lm_eval where it defines nothing of its own. lm-eval's
evaluation flags pass through (read by lm-eval's own parser), ``--tasks list`` lists, a run with
other settings gets its own folder, and results.json keeps what lm_eval's own results file holds
(task hashes, model name, timing) beside peeval's provenance."""

import json

import pytest
from helpers.checkpoints import save_tiny_checkpoint

from peeval.cli import build_parser, main
from peeval.evaluation.runner import parse_model_args, run_name


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "rope"
    return save_tiny_checkpoint(out, ["1 + 2 = 3, 12 + 30 = 42; 0123456789 + ="], pe="rope", vocab_size=300,
                                max_positions=64)  # fmt: skip


def _err_lines(capsys) -> list[str]:
    return [li for li in capsys.readouterr().err.splitlines() if li.strip() and "%|" not in li]


def test_tasks_list_lists_peeval_tasks(capsys):
    assert main(["eval", "--tasks", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("peeval_ppl_pg19", "peeval_passkey", "peeval_diag_addition_test", "peeval_scrolls"):
        assert name in out, name


@pytest.mark.parametrize(("flag", "needle"), [(["--bogus"], "--bogus"), (["--wandb_args", "project=x"], "lm_eval"),
                                              (["--gen_kwargs"], "gen_kwargs")])  # fmt: skip
def test_flags_neither_knows_or_lm_eval_cli_only_are_one_line(flag, needle, ckpt, tmp_path, capsys):
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ckpt}", "--tasks", "peeval_diag_addition_test",
            "--output_path", str(tmp_path / "o"), *flag]  # fmt: skip
    assert main(argv) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("peeval eval: error:") and needle in lines[0], lines
    assert not (tmp_path / "o").exists()


def test_run_folder_names_every_setting():
    def name(*extra):
        args, rest = build_parser().parse_known_args(["eval", "--model", "peeval", "--tasks", "t", *extra])
        from peeval.evaluation.runner import parse_lm_eval_flags

        args.lm_eval_flags = parse_lm_eval_flags(rest)
        return run_name(args, parse_model_args("pretrained=/x/rope"))

    plain = name()
    assert plain == name("--seed", "0")  # the defaults: the names runs had before
    others = [name("--limit", "2"), name("--limit", "3"), name("--num_fewshot", "1"), name("--seed", "1"),
              name("--metadata", '{"lengths": [64]}'), name("--gen_kwargs", "max_gen_toks=3")]  # fmt: skip
    assert len({plain, *others}) == 1 + len(others), others
    assert name("--limit", "2") == others[0]  # the same run asked again: the same folder (refused, not mixed)


def test_passed_through_flags_reach_lm_eval_and_results_keep_lm_eval_fields(ckpt, tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["eval", "--model", "peeval", "--model_args", f"pretrained={ckpt}", "--tasks", "peeval_diag_addition_test",
            "--limit", "2", "--device", "cpu", "--output_path", str(out), "--log_samples",
            "--gen_kwargs", "max_gen_toks=3", "--system_instruction", "Add."]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err[-3000:]
    (run,) = out.iterdir()
    res = json.loads((run / "results.json").read_text())
    assert res["config"]["gen_kwargs"] == {"max_gen_toks": 3}
    assert res["system_instruction"] == "Add."
    assert float(res["total_evaluation_time_seconds"]) > 0 and res["model_name"] == str(ckpt)
    assert set(res["task_hashes"]) == {"peeval_diag_addition_test"}
    assert res["peeval"]["model"] == "peeval"
    rows = [json.loads(li) for li in (run / "samples_peeval_diag_addition_test.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("Add." in json.dumps(r["arguments"]) for r in rows)
    # another --limit is another run, beside the first
    assert main([*argv[: argv.index("--limit") + 1], "1", *argv[argv.index("--limit") + 2 :]]) == 0
    assert len(list(out.iterdir())) == 2
