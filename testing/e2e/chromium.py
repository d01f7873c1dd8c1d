"""Headless Chromium driven over the DevTools protocol (the `websocket` package), for the report's browser
self-test (test_report_browser.py) and the render benchmark (testing/report_render.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from typing import Iterator

import websocket

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevTools:
    """Just enough of the Chrome DevTools protocol: navigate, evaluate, screenshot."""

    def __init__(self, ws_url: str, timeout: float = 60):
        self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def evaluate(self, expression: str, await_promise: bool = False):
        """The expression's value (JSON-serialisable), evaluated in the page."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def close(self) -> None:
        self.ws.close()


@contextlib.contextmanager
def chromium(window: str = "1400,2400", startup_timeout: float = 60) -> Iterator[DevTools]:
    """A fresh headless Chromium (own throw-away profile) and a DevTools connection to its blank page."""
    if CHROMIUM is None:
        raise RuntimeError("chromium not installed (make deps installs it)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="gc-chromium-", ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                 "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                                 f"--remote-debugging-port={port}", "--remote-allow-origins=*",
                                 f"--window-size={window}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # its own process group: renderers go with it
        devtools = None
        try:
            end = time.monotonic() + startup_timeout
            while True:
                try:
                    pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2).read())
                    page = next(p for p in pages if p.get("type") == "page")
                    break
                except Exception:  # noqa: BLE001 - not up yet
                    if time.monotonic() > end or proc.poll() is not None:
                        raise RuntimeError("chromium did not start") from None
                    time.sleep(0.2)
            devtools = DevTools(page["webSocketDebuggerUrl"])
            yield devtools
        finally:
            if devtools is not None:
                devtools.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
