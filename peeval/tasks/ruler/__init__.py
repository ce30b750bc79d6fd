"""lm-eval's own RULER needle-in-a-haystack tasks, declared as a peeval task family (``family.py``); their YAML
and generators stay lm-eval's (``lm_eval/tasks/ruler``)."""
