"""Leave the process without tearing the interpreter down, once a command has finished.

Python's shutdown frees every module and object one by one before the process ends; with torch
loaded (``mlaprof run``) that is ~0.3 s of CPU spent on memory the kernel takes back anyway, a
seventh of the default run. The command line's entry point therefore ends the process itself
(``os._exit``) as the very last exit step: after Python has joined the program's threads and run
every other ``atexit`` handler (temporary folders, loggers, the libraries' own), and after stdout
and stderr are flushed, with the command's exit code. The same trick is Instagram's (``atexit``
``os._exit``: "Dismissing Python Garbage Collection at Instagram", Instagram Engineering, 2017).

The run store needs no teardown: a writer checkpoints and closes its database when it finishes,
and readers only read. Python's own shutdown still runs where something may depend on it: a
command that raised (its traceback and status are Python's), a stream that cannot be flushed
(a closed pipe: Python reports it as usual), a tracer or coverage measurement in the process,
a program that registered its own ``atexit`` handler before the command ran.
``main()`` called in-process (tests, notebooks) never exits.
"""

from __future__ import annotations

import atexit
import os
import sys

_code: list[int] = []


def arm() -> None:
    """Register the quick exit, to run last (``atexit`` runs the last registered first). Not
    where a handler is registered already: a program that runs the command inside its own
    (``runpy``, a wrapper script) keeps every handler it registered, and its shutdown."""
    registered = getattr(atexit, "_ncallbacks", None)  # CPython's count of the handlers
    if registered is None or registered() > 0:
        return
    atexit.register(_leave)


def done(code: int) -> None:
    """The command finished with ``code``: the quick exit may end the process with it."""
    _code.append(code)


def _leave() -> None:
    if not _code or sys.gettrace() is not None or sys.getprofile() is not None:
        return
    if "coverage" in sys.modules:  # its data is written by its own handler, registered first
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe or stream: Python's shutdown reports it
        return
    os._exit(_code[-1])
