"""The one way a ``python -m leaderboard.<module>`` command ends (ingest, publish, site)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def run_command(prog: str, action: Callable[[], str], errors: type[Exception] | tuple[type[Exception], ...]) -> int:
    """Run ``action`` and print ``<prog>: <its line>`` (exit 0); an expected ``errors`` is one line
    ``<prog>: error: ...`` on stderr and exit 2, without a traceback."""
    try:
        line = action()
    except errors as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the commands write beside their outputs and swap: nothing partial is left
        print(f"{prog}: interrupted; nothing half-written was left behind", file=sys.stderr)
        return 130
    print(f"{prog}: {line}")
    return 0
