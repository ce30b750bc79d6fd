"""Fused Triton kernels of two encodings (``tape_attention``, ``pope_attention``; ``_common``: the pieces both
share) with their pure-torch references; the encodings import them lazily when ``attn_backend="triton"``.

Row 1 of the layer table (docs/design.md): ``peeval._log`` only; never the models that call them.
"""
