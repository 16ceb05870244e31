"""``python -m litrag.cli``: the ``litrag`` command."""

import sys

from litrag.cli import main

sys.exit(main())
