"""``python -m kip_lab``: the ``kip-lab`` command."""

import sys

from kip_lab.console import main

sys.exit(main())
