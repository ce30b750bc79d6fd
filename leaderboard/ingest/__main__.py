"""``python -m leaderboard.ingest``: see the package's docstring."""

import sys

from leaderboard.ingest import main

sys.exit(main())
