"""``python -m twinflow.cli``: the same as the ``twinflow`` command."""

import sys

from twinflow.cli._main import main

sys.exit(main())
