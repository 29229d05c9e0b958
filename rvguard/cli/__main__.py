"""``python -m rvguard.cli``: the same program as the ``rvguard`` script."""

import sys

from .program import main

sys.exit(main())
