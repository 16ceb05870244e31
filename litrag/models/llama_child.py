"""Run llama.cpp's OpenAI-compatible server as a child that exits when its parent is gone.

``LlamaServer`` stops the server on a clean exit (``atexit``), but a parent killed by SIGTERM or
SIGKILL runs no exit handlers, and the orphan would keep its 1.4 GB or more and both cores. Linux's
``PR_SET_PDEATHSIG`` fires when the *thread* that forked exits (the chat app starts the model
from a worker thread), so this watches the parent process id instead.

    python -m litrag.models.llama_child --model X.gguf --port 8765 ...   (llama_cpp.server's args)
"""

from __future__ import annotations

import faulthandler
import os
import runpy
import sys
import threading
import time

POLL_SECONDS = 0.5


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os._exit(0)  # the parent is gone: nobody will ever ask this server again


def main() -> None:
    # A fault in llama.cpp (SIGILL, SIGSEGV) leaves the Python stack in the server's log; the
    # parent reads the signal from the exit status and tells the user what it means.
    faulthandler.enable()
    threading.Thread(
        target=_exit_when_orphaned, args=(os.getppid(),), name="orphan-watch", daemon=True
    ).start()
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
