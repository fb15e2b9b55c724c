"""The loopback adbd's services: `shell:` (v1), `shell,v2,...:` (the shell protocol), `exec:`, and `sync:`.

Shell, as adbd runs it (AOSP adb/daemon/shell_service.cpp):
- without the shell protocol (`shell:CMD`, `exec:CMD`) the command gets a PTY in raw mode: stdout and stderr are one
  stream, no exit status is sent, and the stream closes when every holder of the terminal has closed it;
- with it (`shell,v2,raw:CMD`, `shell,v2,pty:CMD`) every packet is [id u8][length u32 LE][data]: 0 stdin, 1 stdout,
  2 stderr, 3 exit (one byte: the status, or 0x80|signal), 4 close stdin, 5 window size "RxC,XxY";
- an empty command is an interactive PTY shell; a host that closes the stream sends the shell SIGHUP.
Commands run as `/bin/sh -c` in the sandbox (device paths rewritten, aarch64 binaries through qemu: sandbox.py).

Sync (AOSP adb/SYNC.TXT): 8-byte requests [id 4 ASCII][u32 LE], all on one byte stream however the host cuts it
into WRTEs: STAT/LIST/SEND/RECV with a path, DATA chunks of at most 64 KiB, DONE (SEND: with the mtime; answered with
OKAY), QUIT; errors are FAIL with a message. Writes are allowed only where the phone's shell user may write
(/data/local/tmp).
"""
from __future__ import annotations

import fcntl
import os
import pty
import signal
import stat
import struct
import subprocess
import termios
import threading
import tty

from harness.devices.loopback.sandbox import Sandbox
from harness.devices.loopback.stream import Stream, StreamClosed

ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN, ID_WINDOW_SIZE = range(6)
SYNC_DATA_MAX = 64 * 1024
MAX_PATH = 1024


def find_service(name: str):
    """The function serving an OPEN of `name`, or None (the OPEN is refused)."""
    if name == "sync:":
        return sync_service
    head, sep, command = name.partition(":")
    if not sep:
        return None
    options = head.split(",")
    if options[0] == "exec" and len(options) == 1:
        return lambda stream, sandbox: run_shell(stream, sandbox, command, v2=False, use_pty=True, raw=True)
    terms = [o[5:] for o in options[1:] if o.startswith("TERM=")]  # adb's client passes its terminal type
    flags = {o for o in options[1:] if not o.startswith("TERM=")}
    if options[0] != "shell" or not flags <= {"v2", "raw", "pty"}:
        return None
    v2, raw = "v2" in flags, "raw" in flags or ("pty" not in flags and bool(command))
    term = terms[-1] if terms else None
    return lambda stream, sandbox: run_shell(stream, sandbox, command, v2=v2, use_pty=not (v2 and raw), raw=raw,
                                             term=term)


def shell_packet(kind: int, data: bytes) -> bytes:
    return struct.pack("<BI", kind, len(data)) + data


def run_shell(stream: Stream, sandbox: Sandbox, command: str, v2: bool, use_pty: bool, raw: bool,
              term: str | None = None):
    argv = ["/bin/sh", "-c", sandbox.rewrite(command)] if command else ["/bin/sh", "-i"]
    env = {**sandbox.shell_env(), **({"TERM": term} if term else {})}
    write_lock = threading.Lock()

    def send(kind: int, data: bytes):
        with write_lock:
            stream.write(shell_packet(kind, data) if v2 else data)

    if use_pty:
        master, slave = pty.openpty()
        if raw:
            tty.setraw(slave)
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=sandbox.root,
                                env=env, start_new_session=True, preexec_fn=_as_device_shell_with_terminal)
        os.close(slave)
        stdin_fd, outputs = master, [(master, ID_STDOUT)]
    else:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=sandbox.root, env=env, start_new_session=True, preexec_fn=_as_device_shell)
        stdin_fd = proc.stdin.fileno()
        outputs = [(proc.stdout.fileno(), ID_STDOUT), (proc.stderr.fileno(), ID_STDERR)]

    def hang_up():  # the host closed the stream or the connection dropped
        try:
            proc.send_signal(signal.SIGHUP)
        except ProcessLookupError:
            pass
    stream.on_close.append(hang_up)

    def pump(fd: int, kind: int):
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: every holder of the PTY's slave side has closed it
                    data = b""
                if not data:
                    return
                send(kind, sandbox.unmap(data))
        except StreamClosed:
            pass

    pumps = [threading.Thread(target=pump, args=o, daemon=True) for o in outputs]
    for t in pumps:
        t.start()
    threading.Thread(target=_feed_stdin, args=(stream, stdin_fd, v2, use_pty, proc), daemon=True).start()
    for t in pumps:
        t.join()
    status = proc.wait()
    sandbox.after_command()
    if v2 and not stream.closed:
        send(ID_EXIT, bytes([status & 0xFF if status >= 0 else 0x80 | -status]))
    if use_pty:
        os.close(master)


def _as_device_shell():
    """A phone's shell starts with SIGHUP at its default (adbd's hang-up kills it); this process may have inherited
    it ignored (run under nohup), and exec would pass that on."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _as_device_shell_with_terminal():
    _as_device_shell()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the PTY becomes the new session's terminal: closing it sends SIGHUP


def _feed_stdin(stream: Stream, fd: int, v2: bool, use_pty: bool, proc):
    """Host -> the command's stdin (raw bytes in v1; stdin / close-stdin / window-size packets in v2)."""
    try:
        while True:
            if not v2:
                os.write(fd, stream.read())
                continue
            kind, length = struct.unpack("<BI", stream.read_exact(5))
            data = stream.read_exact(length)
            if kind == ID_STDIN:
                os.write(fd, data)
            elif kind == ID_CLOSE_STDIN and not use_pty:
                proc.stdin.close()
            elif kind == ID_WINDOW_SIZE and use_pty:
                rows, cols, xp, yp = (int(v) for v in data.decode().replace("x", ",").split(","))
                fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, xp, yp))
    except (StreamClosed, OSError, ValueError):
        pass


# --- sync ---
def _sync(name: bytes, value: int, data: bytes = b"") -> bytes:
    return name + struct.pack("<I", value) + data


def _fail(stream: Stream, message: str):
    stream.write(_sync(b"FAIL", len(message.encode()), message.encode()))


def sync_service(stream: Stream, sandbox: Sandbox):
    while True:
        try:
            head = stream.read_exact(8)
        except StreamClosed:
            return
        request, length = head[:4], struct.unpack("<I", head[4:])[0]
        if request == b"QUIT":
            return
        if request not in (b"STAT", b"LIST", b"SEND", b"RECV"):
            _fail(stream, f"unknown sync request {request!r}")
            return
        if length > MAX_PATH:
            _fail(stream, f"path too long ({length} bytes)")
            return
        path = stream.read_exact(length).decode("utf-8", "surrogateescape")
        if request == b"STAT":
            _stat(stream, sandbox, path)
        elif request == b"LIST":
            _list(stream, sandbox, path)
        elif request == b"RECV":
            _recv(stream, sandbox, path)
        elif not _send(stream, sandbox, path):
            return  # a failed SEND leaves the stream out of step: adbd closes it


def _stat(stream, sandbox, path):
    try:
        st = os.lstat(sandbox.host_path(path))
        fields = (st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime))
    except OSError:
        fields = (0, 0, 0)  # STAT v1 cannot say why: all zeros
    stream.write(b"STAT" + struct.pack("<3I", *fields))


def _list(stream, sandbox, path):
    host = sandbox.host_path(path)
    out = bytearray()
    try:
        names = [".", ".."] + sorted(os.listdir(host))
    except OSError:
        names = []
    for name in names:
        try:
            st = os.lstat(host / name)
        except OSError:
            continue
        raw = name.encode("utf-8", "surrogateescape")
        out += b"DENT" + struct.pack("<4I", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(raw)) + raw
    stream.write(bytes(out) + _sync(b"DONE", 0, b"\0" * 12))  # DONE carries an empty dirent


def _recv(stream, sandbox, path):
    try:
        with open(sandbox.host_path(path), "rb") as f:
            while chunk := f.read(SYNC_DATA_MAX):
                stream.write(_sync(b"DATA", len(chunk), chunk))
    except OSError as e:
        _fail(stream, f"{path}: {e.strerror}")
        return
    stream.write(_sync(b"DONE", 0))


def _send(stream, sandbox, spec) -> bool:
    """SEND "path,mode": DATA chunks until DONE(mtime). Returns False after a FAIL."""
    path, _, mode_text = spec.rpartition(",")
    try:
        mode = int(mode_text)
    except ValueError:
        path, mode = spec, 0o644
    # Read the whole transfer first: even a refused SEND must consume its DATA to stay in step with the host.
    host = sandbox.host_path(path)
    error = None if sandbox.writable(path) else f"{path}: Permission denied (only /data/local/tmp is writable)"
    tmp = host.with_name(f".{host.name}.sync-{os.getpid()}-{threading.get_ident()}")
    f = None
    if error is None:
        try:
            host.parent.mkdir(parents=True, exist_ok=True)
            f = open(tmp, "wb")
        except OSError as e:
            error = f"{path}: {e.strerror}"
    try:
        while True:
            head = stream.read_exact(8)
            kind, length = head[:4], struct.unpack("<I", head[4:])[0]
            if kind == b"DONE":
                mtime = length
                break
            if kind != b"DATA" or length > SYNC_DATA_MAX:
                error = error or f"bad sync data packet {kind!r} of {length} bytes"
                break
            data = stream.read_exact(length)
            if f is not None:
                f.write(data)
    finally:
        if f is not None:
            f.close()
    if error is not None:
        if tmp.exists():
            tmp.unlink()
        _fail(stream, error)
        return False
    if stat.S_ISLNK(mode):
        target = tmp.read_text()
        tmp.unlink()
        if host.is_symlink() or host.exists():
            host.unlink()
        host.symlink_to(target)
    else:
        os.chmod(tmp, stat.S_IMODE(mode) or 0o644)
        os.utime(tmp, (mtime, mtime))
        os.replace(tmp, host)
    stream.write(_sync(b"OKAY", 0))
    return True
