"""Evaluation: ``peeval eval``, plain ``lm_eval`` on peeval's models, and the studies of a trained model.

Owns the runner (``runner.py``: lm-eval on peeval's tasks, the run written with its provenance), what a run
records about itself (``provenance.py``), ``--like <profile>`` (``like.py``), the lm-eval warnings it hides
(``quiet.py``), the ``.pth`` hook that makes peeval's models and tasks visible to plain ``lm_eval`` and
transformers and checks a perplexity length before a model loads (``lm_eval_hook.py``, installed as the top-level
``_peeval_lm_eval_hook``) and the position-shift study (``shift_stability.py``, TAPE table 8:
``python -m peeval.evaluation.shift_stability``).
May import: training, tasks, harness, models, data, records and the shared modules (docs/design.md); never
bench, export or the CLI. Importing this package imports nothing (the modules are imported by name).
"""
