"""``python -m dgpbench``: the ``dgpbench`` command line."""

import sys

from dgpbench.cli.main import main

sys.exit(main())
