"""``peeval export``: a checkpoint folder that plain transformers loads, without peeval.

Owns the export (``checkpoint.py``: as plain Llama weights, or as remote code with the model code copied flat).
May import: models and the shared layer (docs/design.md). Importing this package imports nothing.
"""
