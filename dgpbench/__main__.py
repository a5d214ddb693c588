"""``python -m dgpbench``: the ``dgpbench`` command line."""

import sys

from dgpbench.cli import main

sys.exit(main())
