"""Shared pieces of the loopback adbd tests: an adb key pair, a running loopback, and a raw wire-level client."""
from __future__ import annotations

import contextlib
import socket
import struct

from harness.devices.loopback import wire


def make_keys(folder):
    """(private key path, public key text, adb-shell signer) generated with adb-shell's keygen."""
    from adb_shell.auth.keygen import keygen
    from adb_shell.auth.sign_pythonrsa import PythonRSASigner

    key = folder / "adbkey"
    keygen(str(key))
    pub = (folder / "adbkey.pub").read_text()
    return key, pub, PythonRSASigner(pub, key.read_text())


@contextlib.contextmanager
def authorized_loopback(tmp_path, monkeypatch):
    """A running loopback adbd (its phone folder under tmp_path) that trusts a fresh key, which the harness's adb
    client then uses (EDGEFLOW_ADB_KEY)."""
    from harness.devices.loopback import LoopbackAdbd

    key, pub, _ = make_keys(tmp_path)
    monkeypatch.setenv("EDGEFLOW_ADB_KEY", str(key))
    with LoopbackAdbd(tmp_path / "phone", authorized_keys=(pub,)) as adbd:
        yield adbd


class RawHost:
    """The host end of the transport, message by message, for what adb-shell never sends."""

    def __init__(self, port: int, version: int = wire.VERSION_SKIP_CHECKSUM, maxdata: int = wire.MAX_PAYLOAD,
                 checksums: bool = True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.version, self.maxdata, self.checksums = version, maxdata, checksums

    def send(self, command: int, arg0: int, arg1: int, data: bytes = b"", checksum: int | None = None,
             with_checksum: bool | None = None):
        with_checksum = self.checksums if with_checksum is None else with_checksum
        raw = bytearray(wire.pack(wire.Message(command, arg0, arg1, data), with_checksum))
        if checksum is not None:
            raw[16:20] = struct.pack("<I", checksum)
        self.sock.sendall(raw)

    def recv(self, verify: bool = False) -> wire.Message:
        return wire.read_message(self.sock, verify, wire.MAX_PAYLOAD)

    def connect(self) -> wire.Message:
        # the first CNXN always carries its checksum: the device's version is not known yet
        self.send(wire.A_CNXN, self.version, self.maxdata, b"host::features=shell_v2\0", with_checksum=True)
        return self.recv()

    def open(self, local_id: int, service: str) -> wire.Message:
        self.send(wire.A_OPEN, local_id, 0, service.encode() + b"\0")
        return self.recv()

    def read_stream(self, local_id: int, remote_id: int) -> list[bytes]:
        """WRTE payloads until the device's CLSE, acknowledging each."""
        out = []
        while True:
            msg = self.recv()
            if msg.command == wire.A_CLSE:
                self.send(wire.A_CLSE, local_id, remote_id)
                return out
            assert msg.command == wire.A_WRTE and msg.arg1 == local_id
            out.append(msg.data)
            self.send(wire.A_OKAY, local_id, remote_id)

    def closed_by_device(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, socket.timeout):
            return True
