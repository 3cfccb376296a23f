"""``python -m knossos`` is the ``knossos`` command."""

import sys

from knossos.cli import main

sys.exit(main())
