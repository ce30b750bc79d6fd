"""peeval's logger and a warn-once helper.

A leaf module (stdlib only) so that every layer can import it without a cycle: the kernels
used to import ``log_once`` from ``peeval.models.attention`` while the models import the
kernels.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("peeval")
_said: set[str] = set()


def log_once(msg: str) -> None:
    """Warn once per process: a fallback taken on every forward pass should not flood the log."""
    if msg not in _said:
        _said.add(msg)
        logger.warning(msg)
