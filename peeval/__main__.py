"""``python -m peeval`` is the ``peeval`` command."""

import sys

from peeval.cli import main

sys.exit(main())
