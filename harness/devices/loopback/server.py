"""The loopback adbd's transport: TCP listener, CNXN/AUTH handshake, and OPEN/OKAY/WRTE/CLSE streams.

It behaves as a phone's adbd does (protocol.txt; behaviour checked against adb-shell and Debian's adb client):
- Handshake: the host's CNXN carries its version and max payload; the connection uses the lower of each side's.
  Payload checksums are checked and sent while the negotiated version is 0x01000000 and dropped (sent as 0) from
  0x01000001 on. A host version below 0x01000000 or a max payload below 4096 closes the connection.
- AUTH (as on a user build, ro.adb.secure=1): AUTH TOKEN with 20 random bytes; a SIGNATURE is checked with RSA
  against every key in <root>/data/misc/adb/adb_keys (a bad one gets a new token); an offered RSAPUBLICKEY is
  accepted only with `accept_new_keys` (the user tapping "Always allow", which appends it to adb_keys), otherwise
  the host waits, as in front of an unanswered dialog. `auth_required=False` plays an eng build (no AUTH).
- Streams: OPEN(local, 0, "service\\0") gets OKAY(ours, theirs) or CLSE(0, theirs) for an unknown service. Each WRTE
  from the host is acknowledged with OKAY once the service has taken it (back-pressure); the device sends one WRTE
  at a time and waits for the host's OKAY. A CLSE from the host is answered with CLSE and ends the service (its
  shell gets SIGHUP, as adbd does).
"""
from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path
from typing import Callable

from harness.devices.loopback import adbkey, wire
from harness.devices.loopback.sandbox import Sandbox
from harness.devices.loopback.services import find_service
from harness.devices.loopback.stream import Stream, StreamClosed

log = logging.getLogger("loopback-adbd")
FEATURES = ("shell_v2", "fixed_push_mkdir")  # only what services.py implements: the host picks protocols by these


class Connection(threading.Thread):
    """One host connected over TCP: handshake, then message dispatch to streams."""

    def __init__(self, server: "LoopbackAdbd", sock: socket.socket):
        super().__init__(name=f"adbd-conn-{sock.fileno()}", daemon=True)
        self.server, self.sock = server, sock
        self._send_lock = threading.Lock()
        self.version = wire.VERSION_MIN  # until the host's CNXN says otherwise
        self.max_payload = wire.MAX_PAYLOAD_LEGACY
        self.online = False
        self._token = b""
        self._streams: dict[int, Stream] = {}
        self._next_id = 1
        self._lock = threading.Lock()

    @property
    def checksums(self) -> bool:
        return self.version < wire.VERSION_SKIP_CHECKSUM

    def send(self, msg: wire.Message):
        with self._send_lock:
            try:
                self.sock.sendall(wire.pack(msg, self.checksums))
            except OSError as e:
                raise ConnectionError(f"host went away: {e}") from None

    def forget(self, stream: Stream):
        with self._lock:
            self._streams.pop(stream.local_id, None)

    def drop(self):
        """Tear the connection down (the phone vanished): every stream ends."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def run(self):
        try:
            while True:
                msg = wire.read_message(self.sock, self.checksums, self.server.max_payload)
                self._dispatch(msg)
        except (ConnectionError, OSError) as e:
            log.debug("connection ends: %s", e)
        finally:
            self.sock.close()
            with self._lock:
                streams, self._streams = list(self._streams.values()), {}
            for s in streams:
                s.peer_closed()
            self.server.connection_ended(self)

    # --- handshake ---
    def _dispatch(self, msg: wire.Message):
        if msg.command == wire.A_CNXN:
            return self._on_connect(msg)
        if msg.command == wire.A_AUTH and self._token:
            return self._on_auth(msg)
        if not self.online:
            return  # protocol.txt: messages before the connection is up are ignored
        if msg.command == wire.A_OPEN:
            return self._on_open(msg)
        with self._lock:
            stream = self._streams.get(msg.arg1)
        if stream is None or stream.remote_id != msg.arg0 and msg.command != wire.A_CLSE:
            return  # for a stream that is gone: ignored, as protocol.txt says
        if msg.command == wire.A_OKAY:
            stream.ready()
        elif msg.command == wire.A_WRTE:
            stream.deliver(msg.data)
        elif msg.command == wire.A_CLSE:
            stream.peer_closed()
            stream.close()  # adbd answers the host's CLSE with its own
        else:
            raise wire.ProtocolError(f"unexpected {msg} on an open connection")

    def _on_connect(self, msg: wire.Message):
        if msg.arg0 < wire.VERSION_MIN:
            raise wire.ProtocolError(f"host protocol version {msg.arg0:#x} < {wire.VERSION_MIN:#x}")
        if msg.arg1 < wire.MAX_PAYLOAD_LEGACY:
            raise wire.ProtocolError(f"host max payload {msg.arg1} < {wire.MAX_PAYLOAD_LEGACY}")
        self.version = min(msg.arg0, self.server.version)
        self.max_payload = min(msg.arg1, self.server.max_payload)
        log.info("host %r: version %#x, max payload %d", msg.data.rstrip(b"\0")[:80], self.version, self.max_payload)
        if self.server.auth_required:
            self._challenge()
        else:
            self._go_online()

    def _challenge(self):
        self._token = os.urandom(wire.TOKEN_SIZE)
        self.send(wire.Message(wire.A_AUTH, wire.AUTH_TOKEN, 0, self._token))

    def _on_auth(self, msg: wire.Message):
        if msg.arg0 == wire.AUTH_SIGNATURE:
            if any(key.verify(self._token, msg.data) for key in self.server.authorized_keys()):
                return self._go_online()
            return self._challenge()  # a new token for the host's next key
        if msg.arg0 == wire.AUTH_RSAPUBLICKEY:
            try:
                key = adbkey.parse_public_key(msg.data)
            except adbkey.BadKey as e:
                log.warning("host offered an unusable public key: %s", e)
                return
            if not self.server.accept_new_keys:
                log.warning("host %s offered a new key; not accepted (accept_new_keys=False): it waits, as in "
                            "front of the phone's unanswered dialog", key.comment)
                return
            self.server.authorize(msg.data.rstrip(b"\0").decode())
            return self._go_online()
        raise wire.ProtocolError(f"unknown AUTH type {msg.arg0}")

    def _go_online(self):
        self._token = b""
        self.online = True
        props = self.server.sandbox.props
        banner = "device::" + "".join(f"{k}={props[k]};" for k in ("ro.product.name", "ro.product.model",
                                                                     "ro.product.device"))
        banner += "features=" + ",".join(FEATURES)
        self.send(wire.Message(wire.A_CNXN, self.server.version, self.server.max_payload, banner.encode()))

    # --- streams ---
    def _on_open(self, msg: wire.Message):
        name = msg.data.rstrip(b"\0").decode("utf-8", "replace")
        if msg.arg0 == 0:
            raise wire.ProtocolError("OPEN with local-id 0")
        if self.server.should_vanish(name):
            self.server.go_offline()
            return
        service = find_service(name)
        if service is None:
            log.info("unknown service %r: refused", name)
            self.send(wire.Message(wire.A_CLSE, 0, msg.arg0))
            return
        with self._lock:
            local_id, self._next_id = self._next_id, self._next_id + 1
            stream = self._streams[local_id] = Stream(self, local_id, msg.arg0)
        self.send(wire.Message(wire.A_OKAY, local_id, msg.arg0))

        def serve():
            try:
                service(stream, self.server.sandbox)
            except (StreamClosed, ConnectionError):
                pass
            except Exception:  # a bug in a service must not take the connection down
                log.exception("service %r failed", name)
            finally:
                try:
                    stream.close()
                except ConnectionError:
                    pass
        threading.Thread(target=serve, name=f"adbd-{name[:20]}", daemon=True).start()


class LoopbackAdbd:
    """An adbd on 127.0.0.1 over a sandbox folder. See harness/devices/loopback/__init__.py."""

    def __init__(self, root: str | os.PathLike, *, host: str = "127.0.0.1", port: int = 0,
                 authorized_keys: tuple[str, ...] = (), accept_new_keys: bool = False, auth_required: bool = True,
                 version: int = wire.VERSION_SKIP_CHECKSUM, max_payload: int | None = None, rooted: bool = False,
                 props: dict | None = None, sensors: dict | None = None):
        if version not in (wire.VERSION_MIN, wire.VERSION_SKIP_CHECKSUM):
            raise ValueError(f"version must be {wire.VERSION_MIN:#x} or {wire.VERSION_SKIP_CHECKSUM:#x}, got {version:#x}")
        self.version = version
        # adbd's own limit: 256 KiB before Android 9 (version 0x01000000), 1 MiB from then on
        self.max_payload = max_payload or (wire.MAX_PAYLOAD if version >= wire.VERSION_SKIP_CHECKSUM else 256 * 1024)
        self.sandbox = Sandbox(root, rooted=rooted, props=props, sensors=sensors)
        self.keys_file = Path(str(self.sandbox.root) + "/data/misc/adb/adb_keys")
        for key in authorized_keys:
            self.authorize(key)
        self.accept_new_keys, self.auth_required = accept_new_keys, auth_required
        self._listener = socket.create_server((host, port))
        self.host, self.port = host, self._listener.getsockname()[1]
        self._connections: set[Connection] = set()
        self._lock = threading.Lock()
        self._offline = threading.Event()
        self._vanish: Callable[[str], bool] | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # --- keys ---
    def authorize(self, public_key: str):
        adbkey.parse_public_key(public_key)  # refuse a malformed key up front
        self.keys_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.keys_file, "a") as f:
            f.write(public_key.strip() + "\n")

    def authorized_keys(self) -> list[adbkey.PublicKey]:
        keys = []
        for line in self.keys_file.read_text().splitlines() if self.keys_file.is_file() else []:
            try:
                keys.append(adbkey.parse_public_key(line))
            except adbkey.BadKey:
                pass  # adbd skips lines it cannot parse
        return keys

    # --- life cycle ---
    def start(self) -> "LoopbackAdbd":
        self.sandbox.start()
        self._thread = threading.Thread(target=self._accept, name="adbd-listen", daemon=True)
        self._thread.start()
        return self

    def _accept(self):
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # listener closed by stop()
            if self._offline.is_set():
                sock.close()  # the phone is gone: nothing answers
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock)
            with self._lock:
                self._connections.add(conn)
            conn.start()

    def connection_ended(self, conn: Connection):
        with self._lock:
            self._connections.discard(conn)

    def go_offline(self):
        """The phone vanishes: every connection drops (their shells get SIGHUP) and new ones are refused."""
        self._offline.set()
        with self._lock:
            conns = list(self._connections)
        for c in conns:
            c.drop()

    def go_online(self):
        self._offline.clear()
        self._vanish = None

    def vanish_when(self, predicate: Callable[[str], bool]):
        """Go offline at the first OPEN whose service name satisfies `predicate` (a disconnect mid-sweep)."""
        self._vanish = predicate

    def should_vanish(self, service: str) -> bool:
        return self._vanish is not None and self._vanish(service)

    def stop(self):
        self.go_offline()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self._listener.close()
        if self._thread:
            self._thread.join(timeout=2)
        self.sandbox.stop()

    def __enter__(self) -> "LoopbackAdbd":
        return self.start()

    def __exit__(self, *exc):
        self.stop()
