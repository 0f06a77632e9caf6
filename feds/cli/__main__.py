"""``python -m feds.cli``: the same as the ``feds`` command."""

import sys

from feds.cli import main

sys.exit(main())
