"""peeval's lm-eval tasks: one folder per family (ppl, passkey, scrolls, cbt, hellaswag, ruler, diagnostics) with
its YAMLs and their Python, lm-eval's task folder (the .pth hook adds it to every TaskManager); ``family.py`` /
``groups`` / ``metadata_keys.py``: what the runner and the store read about the families.

Row 4 of the layer table (docs/design.md): may import harness (the model wrappers' argument names), data,
models, records, registry, settings, install, ``peeval.perplexity`` (the ppl task's token plans); never training,
evaluation or anything above.
"""
