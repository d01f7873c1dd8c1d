"""The run's end and the signals around it. SIGTERM takes Ctrl-C's path; once the end has begun, further SIGINT and
SIGTERM are noted and ignored until the session is over, so a second signal cannot cut the deletion or the summary
short (the end is bounded by timeouts.cleanup; SIGKILL still stops it at once, then `make cleanup`)."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from .livelog import log
from .run import Run

ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt("SIGTERM")  # pytest stops, the run's end deletes what it created


def _while_ending(signum: int, frame: Any) -> None:
    # Not livelog.log: this runs in the main thread between two bytecodes, maybe inside log() holding its lock.
    os.write(2, f"[gpuconform] {signal.Signals(signum).name} while the run ends: ignored until its namespaces are "
                f"deleted (within timeouts.cleanup) and the summary is written; SIGKILL stops it at once (then "
                f"`make cleanup`)\n".encode())


class Signals:
    """The session's signal handlers: installed at configure, shielded at the end, restored at unconfigure.
    Handlers can only be set from the main thread, where those hooks run."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}  # signal -> its handler before ours

    def _set(self, sig: int, handler: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            prev = signal.signal(sig, handler)
            self.previous.setdefault(sig, prev)

    def install(self) -> None:
        self._set(signal.SIGTERM, _sigterm)
        # A shell starts a background job (`cmd &`, as CI runners' scripts do) with SIGINT ignored (POSIX, 2.11
        # "Signals and Error Handling"), and Python keeps an inherited SIG_IGN instead of raising
        # KeyboardInterrupt: the run would then ignore an interrupt and leave its namespaces behind.
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            self._set(signal.SIGINT, signal.default_int_handler)

    def shield(self) -> None:
        for sig in ENDING_SIGNALS:
            self._set(sig, _while_ending)

    def restore(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, handler in self.previous.items():
                signal.signal(sig, handler)


def end(run: Run, keep: bool) -> dict:
    """Records the pod timeline, then deletes the run's namespaces (kept when `keep`) within timeouts.cleanup.
    Returns {"pods": timeline, "cleanup_s": seconds}; never raises, so the summary is written whatever the end met."""
    out: dict = {}
    try:
        out["pods"] = run.spaces.pod_timeline()
    except Exception as e:  # noqa: BLE001 - the timeline is a record; deleting what the run made is not
        log(f"could not record the run's pod timeline: {type(e).__name__}: {e}")
        out["pods"] = []
    t0 = time.monotonic()
    try:
        run.cleanup(keep=keep)
    except Exception as e:  # noqa: BLE001 - the summary is still written; `make cleanup` deletes the rest
        log(f"the run's end failed: {type(e).__name__}: {e}; `make cleanup` deletes what it left")
    out["cleanup_s"] = round(time.monotonic() - t0, 3)
    return out
