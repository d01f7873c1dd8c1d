"""The run's signal handlers (gpuconform/pytest_plugin/ending.py)."""

from __future__ import annotations

import signal

from gpuconform.pytest_plugin.ending import Signals


def test_an_inherited_ignored_sigint_still_interrupts_the_run_and_is_given_back_at_the_end():
    """A background job of a non-interactive shell starts with SIGINT ignored; the run must still end (and clean
    up) on Ctrl-C or a CI runner's SIGINT. Seen: testing/e2e/test_plugin_live.py's ctrl-c case under `.ci/run &`."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        s = Signals()
        s.install()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        s.restore()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_handler_already_set_for_sigint_is_left_alone():
    """A handler someone set (not an inherited SIG_IGN, which the first test covers: a backgrounded `.ci/run` starts
    with it, so the test sets its own rather than take whatever the process inherited)."""
    def theirs(signum, frame):  # pragma: no cover - never called
        pass

    before = signal.signal(signal.SIGINT, theirs)
    try:
        s = Signals()
        s.install()
        try:
            assert signal.getsignal(signal.SIGINT) is theirs
        finally:
            s.restore()
        assert signal.getsignal(signal.SIGINT) is theirs
    finally:
        signal.signal(signal.SIGINT, before)
