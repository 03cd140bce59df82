"""A page opened in a real headless Chromium, driven over the DevTools protocol with the standard library
only (one websocket, no Playwright, no driver to keep in step with the browser's version).

    with Browser() as browser:
        page = browser.open(path, width=1366, height=768, screenshot=png_path)
    page.scroll_width, page.inner_width, page.errors

``chromium_path()`` is None where no Chromium is installed (the test then skips and says so); CI installs
Debian's ``chromium`` in .ci/run.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 60.0  # a cold Chromium on a loaded 2-core machine
STEP_TIMEOUT_S = 60.0
# What the page reports about its own layout once loaded: the document's scroll width against the
# window's, the blocks that end past the window's right edge, and the tables wider than the window (which
# then scroll in their own box).
MEASURE = """JSON.stringify({
  scroll_width: document.documentElement.scrollWidth,
  client_width: document.documentElement.clientWidth,
  inner_width: window.innerWidth,
  overflowing: [...document.querySelectorAll("div.table, img, pre, h1, h2, h3, p, ul")]
    .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
    .map(e => e.tagName + ": " + (e.textContent || e.getAttribute("alt") || "").slice(0, 80)),
  tables_scrolling: [...document.querySelectorAll("table")]
    .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
    .map(e => e.textContent.slice(0, 80)),
  tables: document.querySelectorAll("table").length,
  images_broken: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length,
  images: document.images.length,
  elements: [...new Set([...document.querySelectorAll("*")].map(e => e.localName))].sort(),
})"""


def chromium_path() -> str | None:
    """The Chromium to drive: $CHROMIUM, else the first of Debian's and Ubuntu's names on PATH."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    for name in ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class Page:
    scroll_width: int
    client_width: int
    inner_width: int
    overflowing: list[str]
    tables_scrolling: list[str]
    tables: int
    images_broken: int
    images: int
    elements: list[str]  # every element name in the document
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, failed loads


class WebSocket:
    """The client side of RFC 6455, text frames only: enough for the DevTools protocol."""

    def __init__(self, url: str, timeout: float) -> None:
        m = re.fullmatch(r"ws://([^:/]+):(\d+)(/.*)", url)
        assert m, url
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the websocket: {head[:200]!r}")

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            out += chunk
        return out

    def send(self, text: str) -> None:
        data = text.encode()
        n = len(data)
        head = bytes([0x81])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._exact(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._exact(8))
            payload = self._exact(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            if opcode in (0x9, 0xA):  # ping / pong: not part of a message
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """A headless Chromium with a throwaway profile, networking and first-run work off."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or chromium_path()
        if self.binary is None:
            raise FileNotFoundError("no Chromium installed (Debian: apt-get install -y chromium)")
        self.profile = tempfile.mkdtemp(prefix="edgeprof-chromium-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.ws: WebSocket | None = None
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        self.proc = subprocess.Popen(
            [
                str(self.binary), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not start (rc {self.proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        ws_url = self._page_url(port, deadline)
        self.ws = WebSocket(ws_url, STEP_TIMEOUT_S)
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        return self

    def _page_url(self, port: int, deadline: float) -> str:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    targets = json.load(r)
                pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("Chromium opened no page to drive")
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer; the events meanwhile are kept in ``events``."""
        assert self.ws is not None
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def wait_for(self, method: str) -> None:
        assert self.ws is not None
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.ws.recv()))

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = (str(a.get("value", a.get("description"))) for a in p.get("args", []))
                out.append("console: " + " ".join(args))
            elif e.get("method") == "Runtime.exceptionThrown":
                out.append("exception: " + str(p.get("exceptionDetails", {}).get("text")))
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log ({p['entry'].get('source')}): {p['entry'].get('text')}")
        return out

    def open(self, path: Path, *, width: int, height: int, screenshot: Path | None = None) -> Page:
        """``path`` in a ``width`` × ``height`` window, measured once loaded (and screenshot)."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)  # fmt: skip
        self.events.clear()
        self.call("Page.navigate", url=Path(path).resolve().as_uri())
        self.wait_for("Page.loadEventFired")
        measured = self.call("Runtime.evaluate", expression=MEASURE, returnByValue=True)
        if screenshot is not None:
            shot = self.call("Page.captureScreenshot", format="png")
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        return Page(**json.loads(measured["result"]["value"]), errors=self.errors())
