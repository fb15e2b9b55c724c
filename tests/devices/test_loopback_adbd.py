"""The loopback adbd speaks the transport as a phone's adbd does: handshake, RSA auth, versions, checksums, max
payload, streams, shell v1/v2, sync. Driven by adb-shell (what the harness uses), by Debian's adb (an independent
client, when installed) and by a raw wire-level host for what neither client sends."""
import os
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

from harness.devices.loopback import LoopbackAdbd, adbkey, wire
from tests.devices.loopback_fixtures import RawHost, make_keys

HOSTILE = "we'ird $(touch pwned) `id` ;x\"y & | < > \\ *?.bin"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return make_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def adbd(tmp_path, keys):
    with LoopbackAdbd(tmp_path / "phone", authorized_keys=(keys[1],)) as d:
        yield d


def adb_shell_client(adbd, signer, auth_timeout_s=5.0):
    from adb_shell.adb_device import AdbDeviceTcp

    dev = AdbDeviceTcp("127.0.0.1", adbd.port, default_transport_timeout_s=5)
    dev.connect(rsa_keys=[signer], auth_timeout_s=auth_timeout_s)
    return dev


def test_adb_shell_client_runs_commands_and_moves_files(adbd, keys, tmp_path):
    dev = adb_shell_client(adbd, keys[2])
    # shell v1: one merged stream, no exit status (the harness echoes it)
    assert dev.shell("echo out; echo err >&2; exit 3") == "out\nerr\n"
    assert dev.shell("getprop ro.edgeflow.loopback; getprop no.such.prop fallback") == "1\nfallback\n"
    # sync with a hostile file name: nothing is interpreted by a shell
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(300_000))  # > 64 KiB DATA chunks and > one WRTE
    remote = f"/data/local/tmp/t/{HOSTILE}"
    dev.push(str(src), remote)
    mode, size, _ = dev.stat(remote)
    assert size == 300_000 and mode & 0o170000 == 0o100000
    dev.pull(remote, str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    assert HOSTILE in {f.filename.decode() for f in dev.list("/data/local/tmp/t")}
    assert not list(adbd.sandbox.root.rglob("pwned")) and not (tmp_path / "pwned").exists()
    assert dev.stat("/data/local/tmp/t/missing") == (0, 0, 0)
    # the phone's shell user cannot write outside /data/local/tmp
    with pytest.raises(Exception, match="Permission denied"):
        dev.push(str(src), "/system/evil.bin")
    dev.close()


def test_unknown_key_waits_for_the_user_and_allow_stores_it(tmp_path, keys):
    from adb_shell.exceptions import AdbTimeoutError, TcpTimeoutException

    with LoopbackAdbd(tmp_path / "phone") as d:  # no authorized keys, nobody taps "Allow"
        with pytest.raises((AdbTimeoutError, TcpTimeoutException)):
            adb_shell_client(d, keys[2], auth_timeout_s=1)
    with LoopbackAdbd(tmp_path / "phone", accept_new_keys=True) as d:
        adb_shell_client(d, keys[2]).close()
        assert keys[1].split()[0] in d.keys_file.read_text()  # "always allow": the next connection signs
        d.accept_new_keys = False
        assert adb_shell_client(d, keys[2]).shell("echo ok") == "ok\n"


def test_signature_check_is_real_rsa(keys, tmp_path):
    pub = adbkey.parse_public_key(keys[1])
    token = os.urandom(wire.TOKEN_SIZE)
    sig = keys[2].Sign(token)
    assert pub.verify(token, sig)
    assert not pub.verify(os.urandom(wire.TOKEN_SIZE), sig)
    assert not pub.verify(token, sig[:-1] + bytes([sig[-1] ^ 1]))
    other = make_keys(tmp_path)
    assert not adbkey.parse_public_key(other[1]).verify(token, sig)
    with pytest.raises(adbkey.BadKey, match="base64"):
        adbkey.parse_public_key("not a key!")
    raw = bytearray(__import__("base64").b64decode(keys[1].split()[0]))
    raw[4] ^= 1  # n0inv no longer matches the modulus
    with pytest.raises(adbkey.BadKey, match="n0inv"):
        adbkey.parse_public_key(__import__("base64").b64encode(bytes(raw)).decode())


def test_versions_checksums_and_max_payload(tmp_path):
    with LoopbackAdbd(tmp_path / "phone", auth_required=False) as d:
        # 0x01000001: checksums are neither checked nor sent
        host = RawHost(d.port, checksums=False)
        cnxn = host.connect()
        assert cnxn.command == wire.A_CNXN and cnxn.arg0 == wire.VERSION_SKIP_CHECKSUM and cnxn.arg1 == wire.MAX_PAYLOAD
        assert cnxn.data.startswith(b"device::") and b"features=shell_v2" in cnxn.data
        okay = host.open(1, "shell:head -c 10000 /dev/zero")
        assert okay.command == wire.A_OKAY and okay.arg1 == 1
        raw = host.sock.recv(24, socket.MSG_PEEK | socket.MSG_WAITALL)
        assert struct.unpack("<6I", raw)[4] == 0  # data_check sent as 0
        assert b"".join(host.read_stream(1, okay.arg0)) == b"\0" * 10000

        # 0x01000000 with a small max payload: checksums sent and checked, WRTEs cut to the host's maxdata
        old = RawHost(d.port, version=wire.VERSION_MIN, maxdata=4096)
        cnxn = old.connect()
        assert cnxn.arg0 == wire.VERSION_SKIP_CHECKSUM  # the device states its own; both then use the lower
        okay = old.open(1, "shell:head -c 10000 /dev/zero")
        chunks = []
        while (msg := wire.read_message(old.sock, True, wire.MAX_PAYLOAD)).command == wire.A_WRTE:
            chunks.append(msg.data)
            old.send(wire.A_OKAY, 1, okay.arg0)
        assert sum(map(len, chunks)) == 10000 and max(map(len, chunks)) <= 4096
        old.send(wire.A_OPEN, 2, 0, b"shell:echo x\0", checksum=12345)  # corrupt payload: the device hangs up
        assert old.closed_by_device()

        # unknown services are refused with CLSE(0, id); a too-old version closes the connection
        assert host.open(7, "no-such-service:").command == wire.A_CLSE
        ancient = RawHost(d.port, version=0x00FFFFFF)
        ancient.send(wire.A_CNXN, 0x00FFFFFF, wire.MAX_PAYLOAD, b"host::\0")
        assert ancient.closed_by_device()


def test_shell_protocol_v2_separates_streams_and_reports_exit(tmp_path):
    with LoopbackAdbd(tmp_path / "phone", auth_required=False) as d:
        host = RawHost(d.port, checksums=False)
        host.connect()
        okay = host.open(1, "shell,v2,raw:cat; echo err >&2; exit 7")
        host.send(wire.A_WRTE, 1, okay.arg0, struct.pack("<BI", 0, 6) + b"stdin\n" + struct.pack("<BI", 4, 0))
        assert host.recv().command == wire.A_OKAY  # acknowledged once the service took it
        data = b"".join(host.read_stream(1, okay.arg0))
        packets = []
        while data:
            kind, n = struct.unpack("<BI", data[:5])
            packets.append((kind, data[5:5 + n]))
            data = data[5 + n:]
        assert (1, b"stdin\n") in packets and (2, b"err\n") in packets and packets[-1] == (3, bytes([7]))


def test_closing_a_shell_stream_hangs_up_its_command(adbd, keys):
    dev = adb_shell_client(adbd, keys[2])
    stream = dev.streaming_shell("echo __pid=$$; exec sleep 60", decode=False)
    pid = int(next(stream).split(b"=")[1])
    adbd.go_offline()  # the phone vanishes: adbd's streams close, the shell gets SIGHUP
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)
    with pytest.raises(Exception):
        adb_shell_client(adbd, keys[2], auth_timeout_s=1)  # and nothing answers any more
    adbd.go_online()
    assert adb_shell_client(adbd, keys[2]).shell("echo back") == "back\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except (FileNotFoundError, ProcessLookupError):  # gone between open() and read(): /proc says ESRCH
        return False


def test_sandbox_paths_sensors_and_rooted_drop_caches(tmp_path, keys):
    with LoopbackAdbd(tmp_path / "phone", authorized_keys=(keys[1],), rooted=True) as d:
        dev = adb_shell_client(d, keys[2])
        d.sandbox.set_sensor("/sys/class/thermal/thermal_zone0/temp", lambda t: 50_000)
        assert dev.shell("cat '/sys/class/thermal/thermal_zone0/temp'") == "50000\n"
        f = d.sandbox.host_path("/data/local/tmp/w.bin")
        f.write_bytes(b"\1" * 40960)
        f.read_bytes()
        from harness.devices.pagecache import resident_fraction

        assert resident_fraction([f]) == 1.0
        assert dev.shell("su -c 'echo 3 > /proc/sys/vm/drop_caches' && echo ok") == "ok\n"
        assert resident_fraction([f]) == 0.0
    with LoopbackAdbd(tmp_path / "phone2", authorized_keys=(keys[1],)) as d:  # not rooted: no su
        assert "not found" in adb_shell_client(d, keys[2]).shell("su -c id 2>&1")


@pytest.mark.skipif(not shutil.which("aarch64-linux-gnu-gcc") or not shutil.which("qemu-aarch64-static"),
                    reason="needs g++-aarch64-linux-gnu and qemu-user-static (make system-deps)")
def test_aarch64_binaries_run_through_qemu_with_their_pid(adbd, keys, tmp_path):
    src = tmp_path / "hello.c"
    src.write_text('#include <stdio.h>\n#include <unistd.h>\n'
                   'int main(int c, char **v) { printf("%s|%d\\n", c > 1 ? v[1] : "", getpid()); return 4; }\n')
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-O1", "-o", str(tmp_path / "hello"), str(src)], check=True)
    dev = adb_shell_client(adbd, keys[2])
    dev.push(str(tmp_path / "hello"), "/data/local/tmp/bin/hello", st_mode=0o100755)
    out = dev.shell("echo $$; exec /data/local/tmp/bin/hello 'a b'").split()
    assert out[1].startswith("a") and out[2].endswith(f"|{out[0]}")  # exec keeps the pid, as on the phone
    assert dev.shell("env /data/local/tmp/bin/hello x; echo rc=$?").endswith("rc=4\n")


@pytest.mark.skipif(not shutil.which("adb"), reason="needs Debian's adb client (make system-deps)")
def test_debians_adb_client_interoperates(adbd, keys, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "ADB_VENDOR_KEYS": str(keys[0])}
    port = _free_port()
    adb = ["adb", "-P", str(port)]

    def run(*args):
        return subprocess.run([*adb, *args], env=env, capture_output=True, text=True, timeout=60)
    try:
        assert "connected" in run("connect", adbd.address).stdout
        r = run("-s", adbd.address, "shell", "echo out; echo err >&2; exit 5")  # shell,v2: streams and status
        assert (r.stdout, r.stderr, r.returncode) == ("out\n", "err\n", 5)
        src = tmp_path / "f.bin"
        src.write_bytes(os.urandom(2_000_000))
        assert run("-s", adbd.address, "push", str(src), "/data/local/tmp/d/f.bin").returncode == 0
        assert run("-s", adbd.address, "pull", "/data/local/tmp/d/f.bin", str(tmp_path / "g.bin")).returncode == 0
        assert (tmp_path / "g.bin").read_bytes() == src.read_bytes()
    finally:
        run("kill-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
