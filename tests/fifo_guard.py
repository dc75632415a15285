"""A guard that keeps a test of a named pipe from hanging (shared by the FIFO tests)."""

from __future__ import annotations

import os
import threading


class FifoGuard:
    """Opens the write end of ``path`` whenever a reader waits on it, and closes it at once: a
    reader blocked in open() then reads end-of-file instead of hanging, so this test fails
    rather than hangs on a reader that opens the FIFO. ``opened`` says whether one did."""

    def __init__(self, path):
        self.path, self.opened, self._stop = path, False, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.05):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:          # ENXIO: nobody has it open for reading
                continue
            self.opened = True
            os.close(fd)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
