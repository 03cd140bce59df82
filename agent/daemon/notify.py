"""sd_notify for the agent: READY, STATUS and WATCHDOG datagrams to systemd, without a dependency."""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("edgeprof.agent")


class Notifier:
    """sd_notify without a dependency: one datagram per message to ``$NOTIFY_SOCKET`` (no-op when unset)."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address if address is not None else os.environ.get("NOTIFY_SOCKET")

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, **fields: str) -> bool:
        if not self.address:
            return False
        payload = "\n".join(f"{k.upper()}={v}" for k, v in fields.items()).encode()
        addr = self.address
        if addr.startswith("@"):  # abstract namespace socket
            addr = "\0" + addr[1:]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(addr)
                sock.sendall(payload)
            return True
        except OSError as exc:
            log.warning("sd_notify to %s failed: %s", self.address, exc)
            return False

    def watchdog_interval_s(self) -> float | None:
        usec = os.environ.get("WATCHDOG_USEC")
        pid = os.environ.get("WATCHDOG_PID")
        if not usec or (pid and pid != str(os.getpid())):
            return None
        try:
            return int(usec) / 1e6
        except ValueError:
            return None
