"""peeval's logger and a warn-once helper.

A leaf module (stdlib only) so that every layer can import it without a cycle: the kernels
used to import ``log_once`` from ``peeval.models.attention`` while the models import the
kernels.
"""

from __future__ import annotations

import contextlib
import logging

logger = logging.getLogger("peeval")
_said: set[str] = set()


def log_once(msg: str) -> None:
    """Warn once per process: a fallback taken on every forward pass should not flood the log."""
    if msg not in _said:
        _said.add(msg)
        logger.warning(msg)


class _Below(logging.Filter):
    def __init__(self, level: int, part: str | None):
        super().__init__()
        self.level, self.part = level, part

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or (self.part is not None and self.part not in record.getMessage())


@contextlib.contextmanager
def muted(name: str, level: int = logging.ERROR, part: str | None = None):
    """Drop ``name``'s records below ``level`` (only those containing ``part``, when given) while the block runs.

    A filter, never ``setLevel``: transformers reads its loggers' levels to decide what to check (a level set to
    ERROR made every load verify a tensor-parallel plan peeval's models do not use, and print the unsharded layers)."""
    log = logging.getLogger(name)
    f = _Below(level, part)
    log.addFilter(f)
    try:
        yield
    finally:
        log.removeFilter(f)
