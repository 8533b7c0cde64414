"""The ``kip-lab`` command's entry point: Ctrl-C is one line and exit 130 from the first instant.

Importing the command (pydantic, the models, the coordinator) takes most of a second, and a
Ctrl-C during an import would print a traceback of it. So this module imports nothing heavy: it
installs a handler that prints one line and exits 130 before anything else is imported, then
hands over to ``kip_lab.cli.main``, which turns Ctrl-C back into ``KeyboardInterrupt`` for the
command itself to handle (a run stops, a sweep stops its workers).
"""

from __future__ import annotations

import os
import signal
import sys

INTERRUPTED = 130
MESSAGE = b"kip-lab: interrupted\n"


def _interrupted_while_starting(signum: int, frame: object) -> None:
    os.write(2, MESSAGE)
    os._exit(INTERRUPTED)  # nothing started yet: nothing to clean up


def main() -> int:
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    from kip_lab.cli import main as run_command

    return run_command()


if __name__ == "__main__":
    sys.exit(main())
