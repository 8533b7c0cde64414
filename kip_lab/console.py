"""The ``kip-lab`` command's entry point: Ctrl-C is one line and exit 130 from the first instant.

Importing the command (pydantic, the models, the coordinator) takes most of a second, and a
Ctrl-C during an import would print a traceback of it. So this module imports nothing heavy: it
installs a handler that prints one line and exits 130 before anything else is imported, then
hands over to ``kip_lab.cli.main``, which turns Ctrl-C back into ``KeyboardInterrupt`` for the
command itself to handle (a run stops, a sweep stops its workers).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys

INTERRUPTED = 130
MESSAGE = b"kip-lab: interrupted\n"


def _interrupted_while_starting(signum: int, frame: object) -> None:
    os.write(2, MESSAGE)
    os._exit(INTERRUPTED)  # nothing started yet, or the command is over: nothing to clean up


def _ignore_ctrl_c_from_here() -> None:
    # The last exit function (registered first): after it, Python flushes its files and resets a
    # handler it installed to the default, which would end the process by the signal, silently.
    # The command is over and its exit code is set: a Ctrl-C now is ignored instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def main() -> int:
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    atexit.register(_ignore_ctrl_c_from_here)
    try:
        from kip_lab.cli import main as run_command

        code = run_command()
    except KeyboardInterrupt:  # at the command's very edges, outside its own handling: still one line
        os.write(2, MESSAGE)
        code = INTERRUPTED
    # The command is over: a Ctrl-C while the interpreter shuts down is one line and 130 too,
    # not a traceback from the exit.
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    return code


if __name__ == "__main__":
    sys.exit(main())
