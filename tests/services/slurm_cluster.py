"""A real two-node Slurm cluster on 127.0.0.1 for ``make test-services``: munged, slurmctld and two
slurmd (nodes n1 and n2 on this one host), configured in a temporary folder with their own key,
ports, state and logs, started as daemons and stopped by the PID in each one's pid file.

Debian's slurm-wlm and munge (``services/slurm.sh`` installs them when run as root); the recipe is
``services/slurm.sh`` and this module. Running as root is required: slurmd starts
jobs as their user and ``SlurmUser=root`` keeps one account for every daemon.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .servers import free_port

NODES = ("n1", "n2")
CPUS_PER_NODE = 2
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")


def binary(name: str) -> str | None:
    """A Slurm or munge program on PATH or in /usr/sbin (daemons live there, outside a user's PATH)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def missing() -> str | None:
    """Why this machine cannot run the cluster (None: it can)."""
    absent = [n for n in DAEMONS + CLIENTS if binary(n) is None]
    if absent:
        return (
            f"Slurm is not installed ({', '.join(absent)} missing): run `bash services/slurm.sh` "
            f"as root (apt-get install slurm-wlm munge)"
        )
    if os.geteuid() != 0:
        return "the Slurm tests start slurmd, which runs jobs as their user: run them as root"
    return None


class SlurmCluster:
    """munged + slurmctld + slurmd n1 and n2 under ``root`` (a fresh folder); :attr:`env` points
    Slurm's commands (sbatch, squeue...) at it."""

    def __init__(self, root: Path, start_timeout_s: float = 60):
        self.root = Path(root)
        self.conf = self.root / "slurm.conf"
        # munged wants the key's folder closed (0700) and the socket's folder and every folder above
        # it open to all (pytest's tmp folders are 0700): the socket goes in a folder of its own
        self.munge_socket = Path(tempfile.mkdtemp(prefix="vqalab-munge-")) / "munge.sock"
        self.start_timeout_s = start_timeout_s
        self.host = socket.gethostname().split(".")[0]
        self.env = {"SLURM_CONF": str(self.conf)}

    def pid_files(self) -> list[Path]:
        """Every daemon's pid file, in the order they stop (slurmd first, munged last)."""
        return [
            *(self.root / f"slurmd-{n}.pid" for n in NODES),
            self.root / "slurmctld.pid",
            self.root / "munge" / "munged.pid",
        ]

    def write_config(self) -> None:
        """The munge key and slurm.conf: 127.0.0.1 only, free ports, everything under ``root``."""
        munge = self.root / "munge"
        munge.mkdir(parents=True)
        self.munge_socket.parent.chmod(0o755)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munge.chmod(0o700)
        (self.root / "state").mkdir()
        for n in NODES:
            (self.root / "spool" / n).mkdir(parents=True)
        ports = [free_port() for _ in range(1 + len(NODES))]
        nodes = [
            f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 CPUs={CPUS_PER_NODE} "
            f"RealMemory=4000 Port={port}"
            for n, port in zip(NODES, ports[1:])
        ]
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=vqalab-test",
                    f"SlurmctldHost={self.host}(127.0.0.1)",
                    f"SlurmctldPort={ports[0]}",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "CredType=cred/munge",
                    "SlurmUser=root",
                    f"StateSaveLocation={r}/state",
                    f"SlurmdSpoolDir={r}/spool/%n",
                    f"SlurmctldPidFile={r}/slurmctld.pid",
                    f"SlurmctldLogFile={r}/slurmctld.log",
                    f"SlurmdPidFile={r}/slurmd-%n.pid",
                    f"SlurmdLogFile={r}/slurmd-%n.log",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "ReturnToService=2",
                    "MpiDefault=none",
                    "MailProg=/bin/true",
                    # a cancelled job's processes get SIGTERM, then SIGKILL this many seconds later
                    "KillWait=5",
                    *nodes,
                    f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE "
                    "State=UP",
                    "",
                ]
            )
        )
        # no cgroup.conf: 22.05 has no CgroupPlugin=disabled, and slurmd refuses to start with one

    def start(self) -> SlurmCluster:
        """Start every daemon (each forks into the background and writes its pid file), then wait
        until ``sinfo`` shows both nodes idle."""
        self.write_config()
        m = self.root / "munge"
        self._daemon(
            "munged",
            f"--key-file={m}/munge.key",
            f"--socket={self.munge_socket}",
            f"--pid-file={m}/munged.pid",
            f"--log-file={m}/munged.log",
            f"--seed-file={m}/seed",
        )
        self._daemon("slurmctld", "-f", str(self.conf))
        for n in NODES:
            self._daemon("slurmd", "-f", str(self.conf), "-N", n)
        self._wait_idle()
        return self

    def _daemon(self, name: str, *args: str) -> None:
        log = self.root / f"{name}.start.log"
        with log.open("a") as out:
            done = subprocess.run(
                [binary(name), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                timeout=60,
            )
        if done.returncode:
            raise RuntimeError(f"{name} {' '.join(args)} exited {done.returncode}: {self.logs()}")

    def _wait_idle(self) -> None:
        start = time.monotonic()
        states = ""
        while time.monotonic() - start < self.start_timeout_s:
            states = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
            if sorted(states.split()) == sorted([*NODES, *["idle"] * len(NODES)]):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the nodes are not idle after {self.start_timeout_s}s: {states!r}")

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm command against this cluster."""
        return subprocess.run(
            [binary(argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            check=check,
            env={**os.environ, **self.env},
            timeout=60,
        )

    def logs(self) -> str:
        """The end of every daemon's log, for an error message."""
        parts = []
        for log in sorted(self.root.rglob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {log}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel every job, then stop each daemon by the PID in its pid file (SIGTERM, then SIGKILL
        if it is still there after a few seconds)."""
        if self.conf.exists() and binary("scancel"):
            self.run("scancel", "--user", str(os.geteuid()), check=False)
            deadline = time.monotonic() + 20  # their processes end before the daemons go
            while time.monotonic() < deadline and self.run("squeue", "-h", check=False).stdout:
                time.sleep(0.5)
        for pid_file in self.pid_files():
            if pid_file.exists():
                _stop(int(pid_file.read_text().split()[0]))
        shutil.rmtree(self.munge_socket.parent, ignore_errors=True)


def _stop(pid: int, grace_s: float = 10) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
