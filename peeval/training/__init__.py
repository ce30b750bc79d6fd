"""Training: ``peeval train`` (pretraining, diagnostics), ``peeval tokenizer`` and ``peeval adapt``.

Modules, each importing only those listed before it (no cycle; nothing here imports ``peeval.cli``):
``profiles`` (settings per profile, torch-free), ``data`` (corpus, tokenizers, packing, ``Batches``),
``schedule`` (learning rate, data order), ``state`` (resume state, output-folder rules), ``loop``
(``fit``), ``diagnostics`` (diagnostic-task rows), ``device_generators`` (``device_batch``: diagnostic rows
drawn on a torch device), ``pretrain`` (``run_train``), ``adapt`` (``run_adapt``).
This file imports nothing, so ``peeval.training.profiles`` stays cheap for the CLI.

Row 5 of the layer table (docs/design.md): may import tasks, harness, data, models, records, settings,
install, ``_io``, ``_log``, registry; never evaluation, bench, export or the CLI.
"""
