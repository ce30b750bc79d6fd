"""The lm-evaluation-harness model wrappers: peeval's models as lm-eval models.

Owns ``peeval`` / ``peeval-<pe>`` / ``peeval-llama`` (``plugin.py``, pyproject's ``lm_eval.models`` entry points,
registered with no flags by the ``.pth`` hook, ``peeval.evaluation.lm_eval_hook``); they execute the perplexity
task's token plans (``peeval.perplexity``).
May import: models, data and the shared modules (docs/design.md); never the tasks (they read the wrappers'
argument names), training, evaluation or the CLI. Importing this package imports nothing.
"""
