"""adb's RSA keys: the public-key format of ~/.android/adbkey.pub and the check adbd makes on an AUTH signature.

adbkey.pub is `base64(RSAPublicKey) user@host`, where RSAPublicKey (AOSP libcrypto_utils/android_pubkey.c) is
little-endian throughout:

    uint32 modulus_size_words   64 for RSA-2048
    uint32 n0inv                -1 / n mod 2**32 (Montgomery constant)
    uint8  modulus[256]         n, little-endian
    uint8  rr[256]              R**2 mod n with R = 2**2048, little-endian
    uint32 exponent             65537

The host signs adbd's 20-byte token with PKCS#1 v1.5 as if the token were a SHA-1 digest (no hashing of its own), so
the check is: signature**e mod n == 00 01 FF..FF 00 || DigestInfo(SHA-1) || token.
"""
from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass

MODULUS_BYTES = 256
_STRUCT = struct.Struct(f"<II{MODULUS_BYTES}s{MODULUS_BYTES}sI")
SHA1_DIGEST_INFO = bytes.fromhex("3021300906052b0e03021a05000414")  # DER prefix of a SHA-1 DigestInfo


class BadKey(ValueError):
    """A public key that is not in adb's format or is internally inconsistent."""


@dataclass(frozen=True)
class PublicKey:
    n: int
    e: int
    comment: str  # the "user@host" after the base64 blob

    def verify(self, token: bytes, signature: bytes) -> bool:
        """True when `signature` is this key's PKCS#1 v1.5 signature of `token` taken as a SHA-1 digest."""
        if len(signature) != MODULUS_BYTES or int.from_bytes(signature, "big") >= self.n:
            return False
        decoded = pow(int.from_bytes(signature, "big"), self.e, self.n).to_bytes(MODULUS_BYTES, "big")
        suffix = b"\x00" + SHA1_DIGEST_INFO + token
        expected = b"\x00\x01" + b"\xff" * (MODULUS_BYTES - 2 - len(suffix)) + suffix
        return decoded == expected


def parse_public_key(text: str | bytes) -> PublicKey:
    """An adbkey.pub line (or an AUTH RSAPUBLICKEY payload, which is the same text and a NUL)."""
    if isinstance(text, bytes):
        text = text.rstrip(b"\0").decode("utf-8", "replace")
    blob, _, comment = text.strip().partition(" ")
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise BadKey("public key is not base64") from None
    if len(raw) != _STRUCT.size:
        raise BadKey(f"public key blob is {len(raw)} bytes, expected {_STRUCT.size} (RSA-2048 in adb's format)")
    words, n0inv, modulus, rr, e = _STRUCT.unpack(raw)
    n = int.from_bytes(modulus, "little")
    if words != MODULUS_BYTES // 4 or n.bit_length() != MODULUS_BYTES * 8 or n % 2 == 0:
        raise BadKey("public key modulus is not a 2048-bit odd number")
    if (n0inv * n + 1) % 2**32 != 0:
        raise BadKey("public key's n0inv does not match its modulus")
    if int.from_bytes(rr, "little") != pow(2, 2 * MODULUS_BYTES * 8, n):
        raise BadKey("public key's rr does not match its modulus")
    if e < 3 or e % 2 == 0:
        raise BadKey(f"public key exponent {e} is not an odd number >= 3")
    return PublicKey(n, e, comment)
