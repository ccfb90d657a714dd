"""``python -m pyrmq`` runs the command line."""

import sys

from pyrmq.cli import main

sys.exit(main())
