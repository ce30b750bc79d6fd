"""Benchmarks of the model code: speed and memory of every encoding as ratios to ``rope`` in one run.

Owns the forward / training-step benchmark of ``make bench`` (``forward.py``: ``python -m peeval.bench.forward``)
and a profile's whole training step per encoding and back-end (``train.py``: ``peeval bench --train``).
May import: training, models and the shared layer (docs/design.md). Importing this package imports nothing.
"""
