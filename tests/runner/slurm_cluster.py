"""A single-node SLURM cluster on localhost, from Debian's packages (`slurm-wlm`, `munge`), for the tests.

Everything lives in one temporary folder: a generated munge key, munged's socket, slurm.conf (free ports, this host's
real CPUs and memory from `slurmd -C`), the controller's state, slurmd's spool, every log and pid file. No systemd:
munged (-F), slurmctld and slurmd (-D) run in the foreground as children of this process, each told by the kernel
to end when this process dies (PR_SET_PDEATHSIG), so a killed test run leaves no daemon behind. `stop()` cancels the
jobs and ends exactly those processes (by pid); it is safe to call after a failed start.

Accounting: there is no slurmdbd here (it needs MySQL), so `AccountingStorageType=accounting_storage/none` and the
job completion log `JobCompType=jobcomp/filetxt`; `sacct --completion` reads that log (`accounting()`). submitit,
which Hydra's SLURM launcher uses, asks `sacct -o JobID,State,NodeList --parsable2 -j ID` whether a job without a
result file (a cancelled one) has ended; plain sacct refuses without slurmdbd, so the cluster puts a small `sacct`
in its bin/ folder that answers exactly that query from the controller (`squeue --states=all`, which keeps finished
jobs for MinJobAge) and hands every other call to the real sacct. Put `env()` in the environment of the submitter.
"""
from __future__ import annotations

import ctypes
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "sacct", "srun")

SACCT_FOR_SUBMITIT = """#!/bin/sh
# submitit asks `sacct -o JobID,State,NodeList --parsable2 -j ID [-j ID ...]` for the state of jobs that ended without
# a result file. This test cluster has no slurmdbd, so that query is answered from the controller (squeue keeps
# finished jobs for MinJobAge); any other use goes to the real sacct.
case " $* " in
  *" -o JobID,State,NodeList --parsable2 "*) ;;
  *) exec {real} "$@" ;;
esac
ids=""
while [ $# -gt 0 ]; do
  case "$1" in -j) ids="$ids${{ids:+,}}$2"; shift 2 ;; *) shift ;; esac
done
echo "JobID|State|NodeList"
exec squeue --states=all --noheader --format='%i|%T|%N' ${{ids:+--jobs=$ids}} 2>/dev/null
"""


class ClusterError(RuntimeError):
    """The cluster did not come up (or a command against it failed); the message carries the daemons' logs."""


def missing_tools() -> list[str]:
    return [t for t in (*DAEMONS, *CLIENTS, "munge", "unmunge") if not shutil.which(t, path=_sbin_path())]


def _sbin_path() -> str:
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SlurmCluster:
    def __init__(self, start_timeout_s: float = 60.0):
        self.start_timeout_s = start_timeout_s
        # Not pytest's tmp_path: munged wants every folder above its socket traversable by all (mode 0755).
        self.root = Path(tempfile.mkdtemp(prefix="edgeflow-slurm-"))
        self.root.chmod(0o755)
        self.bin, self.log, self.state = self.root / "bin", self.root / "log", self.root / "state"
        self.conf = self.root / "slurm.conf"
        self.socket = self.root / "munge" / "munge.socket"
        self.jobcomp = self.log / "jobcomp.txt"
        self.procs: dict[str, subprocess.Popen] = {}
        self.node = ""
        self.cpus = 0
        self.partition = "debug"

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> "SlurmCluster":
        missing = missing_tools()
        if missing:
            raise ClusterError(f"SLURM test cluster: {', '.join(missing)} not installed; `make system-deps` installs "
                               f"Debian's slurm-wlm and munge (apt-get install -y slurm-wlm munge)")
        try:
            self._start_munged()
            self._write_conf()
            self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
            self._start("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
            self._wait_idle()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel every job, then end what this cluster started, by pid: slurmd, slurmctld (SIGTERM, SIGKILL after
        10 s), any process still carrying this cluster's SLURM_CONF (job steps, tasks), munged. Never raises."""
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            try:
                self.run("scancel", f"--user={getpass.getuser()}", timeout=15, check=False)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and any(
                        j["state"] in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING") for j in self.jobs()):
                    time.sleep(0.5)
            except (OSError, subprocess.SubprocessError, ClusterError):
                pass
        for name in ("slurmd", "slurmctld"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self._kill_leftovers()
        munged = self.procs.get("munged")
        if munged is not None and munged.poll() is None:
            munged.terminate()
            try:
                munged.wait(timeout=10)
            except subprocess.TimeoutExpired:
                munged.kill()
                munged.wait(timeout=10)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()

    # --- using it ------------------------------------------------------------------------------------------------
    def env(self, base: dict | None = None) -> dict:
        """An environment whose SLURM commands talk to this cluster (and whose `sacct` answers submitit)."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = f"{self.bin}:{_sbin_path()}"
        return env

    def run(self, *cmd: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run(list(cmd), env=self.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=timeout)
        if check and res.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)} exited with {res.returncode}: {res.stderr.strip()}\n{self.logs()}")
        return res

    def jobs(self) -> list[dict]:
        """Every job the controller knows (finished ones too), as {id, state, name, node}."""
        out = self.run("squeue", "--states=all", "--noheader", "--format=%i|%T|%j|%N").stdout
        return [dict(zip(("id", "state", "name", "node"), line.split("|"))) for line in out.splitlines() if line]

    def accounting(self) -> str:
        """`sacct --completion`: the job completion log (jobcomp/filetxt), the accounting this cluster has."""
        fields = "JobID,JobName,Partition,State,ExitCode,Start,End,Elapsed,NodeList"
        return self.run("sacct", "--completion", f"--format={fields}", check=False).stdout

    def logs(self, tail: int = 40) -> str:
        parts = []
        for path in sorted(self.log.glob("*")):
            if path.name == "jobcomp.txt" or (path.suffix == ".stderr" and path.with_suffix(".log").exists()):
                continue  # a daemon's stderr repeats its log file
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- {path.name} (last {len(lines)} lines) ---\n" + "\n".join(lines))
        return "\n".join(parts)

    # --- internals ---------------------------------------------------------------------------------------------
    def _start_munged(self) -> None:
        key_dir = self.root / "munge-key"
        key_dir.mkdir(mode=0o700)
        self.socket.parent.mkdir(mode=0o755)
        for d in (self.bin, self.log, self.state, self.root / "spool"):
            d.mkdir(mode=0o755)
        key = key_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        pid_file = self.root / "munge" / "munged.pid"
        # In the foreground (-F), a child of this process like the SLURM daemons.
        self._start("munged", ["munged", "-F", f"--key-file={key}", f"--socket={self.socket}",
                               f"--pid-file={pid_file}", f"--log-file={self.log / 'munged.log'}",
                               f"--seed-file={key_dir / 'munged.seed'}"])

        def credential():
            if self.procs["munged"].poll() is not None:
                raise ClusterError(f"munged exited with {self.procs['munged'].returncode}\n{self.logs()}")
            return self.socket.exists() and subprocess.run(
                ["munge", "-n", "-S", str(self.socket)], capture_output=True, timeout=10,
                stdin=subprocess.DEVNULL).returncode == 0
        self._wait_for(credential, f"a munge credential from {self.socket}")

    def _write_conf(self) -> None:
        # `slurmd -C` prints this host's node line: NodeName=<host> CPUs=.. Boards=.. ... RealMemory=<MiB>
        node_line = subprocess.run(["slurmd", "-C"], env=self.env(), capture_output=True, text=True, timeout=30,
                                   stdin=subprocess.DEVNULL).stdout.splitlines()[0]
        fields = dict(item.split("=", 1) for item in node_line.split())
        self.node, self.cpus = fields["NodeName"], int(fields["CPUs"])
        ctld_port, slurmd_port = _free_ports(2)
        user = getpass.getuser()
        r = self.root
        sacct = shutil.which("sacct", path=_sbin_path())
        (self.bin / "sacct").write_text(SACCT_FOR_SUBMITIT.format(real=sacct))
        (self.bin / "sacct").chmod(0o755)
        self.conf.write_text(textwrap.dedent(f"""\
            # Generated by tests/runner/slurm_cluster.py: a single-node test cluster in {r}
            ClusterName=edgeflowtest
            SlurmctldHost={self.node}(127.0.0.1)
            SlurmctldPort={ctld_port}
            SlurmdPort={slurmd_port}
            AuthType=auth/munge
            CredType=cred/munge
            AuthInfo=socket={self.socket}
            SlurmUser={user}
            SlurmdUser={user}
            StateSaveLocation={self.state}
            SlurmdSpoolDir={r / 'spool'}
            SlurmctldPidFile={r / 'slurmctld.pid'}
            SlurmdPidFile={r / 'slurmd.pid'}
            SlurmctldLogFile={self.log / 'slurmctld.log'}
            SlurmdLogFile={self.log / 'slurmd.log'}
            SlurmctldDebug=info
            SlurmdDebug=info
            # no cgroups, no MPI: processes tracked through /proc
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            MpiDefault=none
            SwitchType=switch/none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_Core_Memory
            DefMemPerCPU=512
            # no slurmdbd: the job completion log is the accounting (sacct --completion)
            JobAcctGatherType=jobacct_gather/none
            AccountingStorageType=accounting_storage/none
            JobCompType=jobcomp/filetxt
            JobCompLoc={self.jobcomp}
            # finished jobs stay visible to squeue/scontrol for an hour (submitit reads their state)
            MinJobAge=3600
            ReturnToService=2
            SchedulerType=sched/builtin
            SlurmdTimeout=60
            InactiveLimit=0
            # scancel: SIGTERM (submitit ignores it), SIGKILL 1 s later
            KillWait=1
            {node_line.split(' UpTime=')[0]} NodeAddr=127.0.0.1 State=UNKNOWN
            PartitionName={self.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
            """))

    def _start(self, name: str, cmd: list[str]) -> None:
        out = open(self.log / f"{name}.stderr", "wb")
        self.procs[name] = subprocess.Popen(cmd, env=self.env(), stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=die_with_parent)

    def _wait_idle(self) -> None:
        def idle():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise ClusterError(f"{name} exited with {proc.returncode} during start-up\n{self.logs()}")
            res = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=self.env(), capture_output=True,
                                 text=True, timeout=10, stdin=subprocess.DEVNULL)
            return res.returncode == 0 and res.stdout.strip() == "idle"
        self._wait_for(idle, "the node to be idle (sinfo)")

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.2)
        raise ClusterError(f"SLURM test cluster: timed out after {self.start_timeout_s:.0f} s waiting for {what}\n"
                           f"{self.logs()}")

    def _kill_leftovers(self) -> None:
        """Processes started under this cluster (job steps, job scripts, their children: every one inherits the
        environment with SLURM_CONF=<our slurm.conf>) that are still alive after the daemons stopped."""
        marker = f"\0SLURM_CONF={self.conf}\0".encode()
        for proc_dir in Path("/proc").glob("[0-9]*"):
            pid = int(proc_dir.name)
            if pid == os.getpid():
                continue
            try:
                environ = b"\0" + (proc_dir / "environ").read_bytes() + b"\0"
            except OSError:
                continue
            if marker in environ:
                _kill_pid(pid, grace_s=5)


def die_with_parent() -> None:
    """In the daemon's child process before exec: SIGTERM when the test process dies, even by SIGKILL or a CI
    timeout, so no daemon outlives it (Linux prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


def _kill_pid(pid: int, grace_s: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
