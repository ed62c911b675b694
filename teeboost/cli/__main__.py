"""``python -m teeboost.cli``: the ``teeboost`` command."""

import sys

from . import main

sys.exit(main())
