"""``peeval eval`` starts without torch / transformers (issue 17 item 5): its parser and
task index import neither (the model plugin does, when the model is built)."""

import os
import subprocess
import sys
import tempfile

from conftest import REPO

CODE = """
import sys
from peeval import cli; from peeval.evaluation import runner as evaluation
a = cli.build_parser().parse_args(["eval", "--model", "peeval", "--tasks", "peeval_ppl_pg19"])
tm = evaluation.task_manager(a.tasks, None)
assert "peeval_ppl_pg19" in tm.all_tasks
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(",".join(heavy) or "none")
"""


def test_eval_parser_and_task_index_import_no_torch():
    env = {**os.environ, "PYTHONPATH": REPO, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CODE], cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "none"


def test_train_pe_choices_are_the_encodings():
    from peeval import cli
    from peeval.models.encodings import ENCODINGS

    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    pe = next(a for a in sub.choices["train"]._actions if a.dest == "pe")
    assert sorted(pe.choices) == sorted(ENCODINGS)
