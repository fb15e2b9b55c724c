"""python -m harness.devices.loopback --root DIR [--port 5555] [--key ~/.android/adbkey.pub] [--rooted] ..."""
from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path

from harness.devices.loopback import LoopbackAdbd, wire


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m harness.devices.loopback", description=__doc__)
    p.add_argument("--root", required=True, help="folder that plays the phone's file system (created if missing)")
    p.add_argument("--port", type=int, default=5555)
    p.add_argument("--key", action="append", default=[], help="an authorized adbkey.pub (repeatable)")
    p.add_argument("--accept-new-keys", action="store_true", help="accept a key the host offers (the 'Allow' tap)")
    p.add_argument("--no-auth", action="store_true", help="no AUTH, like an eng build")
    p.add_argument("--legacy", action="store_true", help="protocol version 0x01000000 (checksums), as before Android 9")
    p.add_argument("--rooted", action="store_true", help="provide su and an emulated drop_caches")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    keys = tuple(Path(k).expanduser().read_text() for k in args.key)
    adbd = LoopbackAdbd(args.root, port=args.port, authorized_keys=keys, accept_new_keys=args.accept_new_keys,
                        auth_required=not args.no_auth, rooted=args.rooted,
                        version=wire.VERSION_MIN if args.legacy else wire.VERSION_SKIP_CHECKSUM)
    with adbd:
        print(f"loopback adbd listening on {adbd.address}, sandbox {adbd.sandbox.root} (Ctrl-C stops)", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})


if __name__ == "__main__":
    main()
