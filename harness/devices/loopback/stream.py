"""One adb stream of the loopback adbd: OPENed by the host, read and written by a service thread (services.py), fed
by the connection's reader thread (server.py), with adbd's back-pressure (one WRTE in flight until the host's OKAY)."""
from __future__ import annotations

import threading
from collections import deque
from typing import Callable

from harness.devices.loopback import wire


class StreamClosed(EOFError):
    """The stream was closed (by the host, or because the connection went away)."""


class Stream:
    """One OPENed stream; the service thread reads and writes it, the connection's reader thread feeds it."""

    def __init__(self, conn, local_id: int, remote_id: int):
        # conn: server.Connection (its send, forget and max_payload)
        self.conn, self.local_id, self.remote_id = conn, local_id, remote_id
        self._cond = threading.Condition()
        self._inbox: deque[bytes] = deque()
        self._buf = bytearray()
        self._can_write = True  # the host's OPEN implies one READY
        self.closed = False
        self._sent_close = False
        self.on_close: list[Callable[[], None]] = []  # e.g. SIGHUP the shell

    # called by the connection
    def deliver(self, data: bytes):
        with self._cond:
            self._inbox.append(data)
            self._cond.notify_all()

    def ready(self):
        with self._cond:
            self._can_write = True
            self._cond.notify_all()

    def peer_closed(self):
        with self._cond:
            if self.closed:
                return
            self.closed = True
            self._cond.notify_all()
        for f in self.on_close:
            f()

    # called by the service
    def read(self) -> bytes:
        """The next WRTE payload from the host (acknowledged now); StreamClosed at the end."""
        with self._cond:
            while not self._inbox and not self.closed:
                self._cond.wait()
            if not self._inbox:
                raise StreamClosed()
            data = self._inbox.popleft()
        self.conn.send(wire.Message(wire.A_OKAY, self.local_id, self.remote_id))
        return data

    def read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._buf += self.read()
        out, self._buf = bytes(self._buf[:n]), self._buf[n:]
        return out

    def write(self, data: bytes):
        """Send data as WRTE messages of at most the negotiated payload, each after the host's OKAY."""
        step = self.conn.max_payload
        for i in range(0, len(data), step):
            with self._cond:
                while not self._can_write and not self.closed:
                    self._cond.wait()
                if self.closed:
                    raise StreamClosed()
                self._can_write = False
            self.conn.send(wire.Message(wire.A_WRTE, self.local_id, self.remote_id, data[i:i + step]))

    def close(self):
        """Close from the device side (the service is done)."""
        with self._cond:
            self.closed = True
            send, self._sent_close = not self._sent_close, True
            self._cond.notify_all()
        if send:
            self.conn.send(wire.Message(wire.A_CLSE, self.local_id, self.remote_id))
        self.conn.forget(self)
