"""Installation: what peeval runs on and what a command needs installed.

Owns the lock (``lock.py``: constraints.txt's one reader and writer, ``python -m peeval.install.lock``), the
upstream releases the suite passed on (``versions.py``: ``TESTED``, the one log line outside them, the CPU's
identity a run records) and pyproject's extras at the point of use (``extras.py``: a missing one is one line).
May import: the standard library, ``peeval._log``. Layer 0 (docs/design.md): every other package may import it.
"""
