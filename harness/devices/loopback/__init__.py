"""A loopback adbd: an Android phone's adb daemon on 127.0.0.1, over a folder that plays the phone's file system.

Tests run the whole phone path against it (harness/devices/android.py, adb-shell, the pushed aarch64 tools and
edgeflow-run under qemu), and a user without a phone can rehearse docs/android.md's first hour with it:

    python -m harness.devices.loopback --root /tmp/phone --port 5555 --key ~/.android/adbkey.pub
    python -m harness device=android device.adb_address=127.0.0.1:5555 experiment=ttft system=edgeflow ...

It lives in the package rather than under tests/ for that reason. It is not a security boundary: commands run as
the user who started it, on this host. What it emulates and how: wire.py (framing), adbkey.py (RSA keys),
server.py (handshake and streams), services.py (shell, sync), sandbox.py (paths, sensors, qemu).
"""
from harness.devices.loopback.server import LoopbackAdbd  # noqa: F401
