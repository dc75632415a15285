"""``python -m corrpriors.cli`` runs the command line (as ``python -m corrpriors`` does)."""

import sys

from . import main

sys.exit(main())
