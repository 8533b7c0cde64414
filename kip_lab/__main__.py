"""``python -m kip_lab``: the ``kip-lab`` command."""

import sys

from kip_lab.console import main

if __name__ == "__main__":
    sys.exit(main())
