"""The ADB transport's wire format (AOSP adb/protocol.txt), as both ends of a connection see it.

A message is a 24-byte header of six little-endian uint32 words, then `data_length` bytes of payload:

    command      four ASCII letters read as a little-endian uint32 ("CNXN" -> 0x4e584e43)
    arg0, arg1   meaning per command (versions, stream ids, auth type)
    data_length  payload bytes (<= the negotiated max payload)
    data_check   sum of the payload's bytes mod 2**32; required up to protocol version 0x01000000, ignored (and
                 sent as 0) once both ends speak 0x01000001 (Android 9 and later)
    magic        command ^ 0xffffffff
"""
from __future__ import annotations

import struct
from dataclasses import dataclass


def _cmd(name: bytes) -> int:
    return int.from_bytes(name, "little")


A_SYNC, A_CNXN, A_AUTH, A_OPEN = _cmd(b"SYNC"), _cmd(b"CNXN"), _cmd(b"AUTH"), _cmd(b"OPEN")
A_OKAY, A_CLSE, A_WRTE, A_STLS = _cmd(b"OKAY"), _cmd(b"CLSE"), _cmd(b"WRTE"), _cmd(b"STLS")
COMMANDS = {A_SYNC: "SYNC", A_CNXN: "CNXN", A_AUTH: "AUTH", A_OPEN: "OPEN", A_OKAY: "OKAY", A_CLSE: "CLSE",
            A_WRTE: "WRTE", A_STLS: "STLS"}

VERSION_MIN = 0x01000000  # checksummed payloads; before Android 9
VERSION_SKIP_CHECKSUM = 0x01000001  # payload checksums no longer checked
MAX_PAYLOAD_LEGACY = 4096  # what pre-2016 adb hard-coded; CNXN and AUTH must fit it before maxdata is known
MAX_PAYLOAD = 1024 * 1024  # adbd since Android 9 (256 KiB before)

AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
TOKEN_SIZE = 20  # bytes of random challenge; signed as if it were a SHA-1 digest

HEADER = struct.Struct("<6I")


class ProtocolError(ConnectionError):
    """The peer broke the protocol (bad magic, bad checksum, oversized payload): the connection must close."""


@dataclass(frozen=True)
class Message:
    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    def __str__(self) -> str:
        return f"{COMMANDS.get(self.command, hex(self.command))}({self.arg0:#x}, {self.arg1:#x}, {len(self.data)} B)"


def checksum(data: bytes) -> int:
    return sum(data) & 0xFFFFFFFF


def pack(msg: Message, with_checksum: bool) -> bytes:
    check = checksum(msg.data) if with_checksum else 0
    return HEADER.pack(msg.command, msg.arg0, msg.arg1, len(msg.data), check, msg.command ^ 0xFFFFFFFF) + msg.data


def recv_exact(sock, n: int) -> bytes:
    """n bytes from a socket; ConnectionError when the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        buf += chunk
    return bytes(buf)


def read_message(sock, verify_checksum: bool, max_payload: int) -> Message:
    command, arg0, arg1, length, check, magic = HEADER.unpack(recv_exact(sock, HEADER.size))
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic {magic:#x} for command {command:#x}")
    if length > max_payload:
        raise ProtocolError(f"payload of {length} bytes exceeds the max payload {max_payload}")
    data = recv_exact(sock, length) if length else b""
    if verify_checksum and checksum(data) != check:
        raise ProtocolError(f"payload checksum {checksum(data):#x} != header's {check:#x} "
                            f"({COMMANDS.get(command, hex(command))})")
    return Message(command, arg0, arg1, data)
