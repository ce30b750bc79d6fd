"""``python -m leaderboard.site``: build the site (leaderboard/site/build.py)."""

import sys

from leaderboard.site.build import main

sys.exit(main())
