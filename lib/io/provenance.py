"""Provenance sidecars: what produced an artifact (date, git SHA, params, seed, package versions).

Every stage calls :func:`write_provenance` on its output folder; the resulting ``provenance.json``
is enough to rerun the stage: ``make stage STAGE=<stage>`` with the recorded params at the recorded
commit. Values of keys that look like secrets are redacted (only variable *names* belong in params).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from lib.core.paths import ROOT
from lib.io import write_json

PACKAGES = (
    "vqalab",
    "torch",
    "transformers",
    "accelerate",
    "peft",
    "datasets",
    "openai",
    "outlines",
    "papermill",
)
_SECRET = re.compile(
    r"(key|token|secret|password|passwd|auth|authorization|bearer|headers|credentials?|cookie)$",
    re.IGNORECASE,
)


def git_state(root: Path = ROOT) -> dict:
    """The commit SHA and whether the tree had uncommitted changes (``None`` outside git)."""

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "dirty": bool(status) if status is not None else None}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _key_values(v) -> set[str]:
    """The values of the environment variables that ``api_key_env`` entries name (and OpenAI's default)."""
    names = {"OPENAI_API_KEY"}

    def walk(x):
        if isinstance(x, dict):
            names.update(str(x["api_key_env"]) for _ in [0] if "api_key_env" in x)
            for y in x.values():
                walk(y)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(v)
    return {os.environ[n] for n in names if len(os.environ.get(n, "")) >= 4}


def redact(params: dict) -> dict:
    """Params with secret-looking values replaced (``api_key_env`` names a variable: kept), and any
    key value that the named variables hold removed wherever it appears."""
    keys = _key_values(params)

    def scrub(s: str) -> str:
        for k in keys:
            s = s.replace(k, "<redacted>")
        return s

    def walk(v, key=""):
        if key and _SECRET.search(key) and v:  # a credential-shaped field: nothing of it is kept
            return "<redacted>"
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return scrub(v) if isinstance(v, str) else v

    return walk(params)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[str]:
    """The CUDA GPUs' names and memory (``nvidia-smi``, else torch when it is already imported); [] for none."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout
            return [
                ", ".join(p.strip() for p in line.split(","))
                for line in out.splitlines()
                if line.strip()
            ]
        except (OSError, subprocess.SubprocessError):
            pass
    torch = sys.modules.get(
        "torch"
    )  # never imported here just to ask: a process that uses a GPU has it
    if torch is not None and torch.cuda.is_available():
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return []


def machine() -> dict:
    """What a measured time depends on: platform, CPU model, cores and GPUs."""
    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "gpu": gpus(),
    }


def provenance(
    stage: str, params: dict, seed: int | None = None, origin: dict | None = None
) -> dict:
    return {
        "stage": stage,
        "profile": (origin or {}).get("profile"),
        "run": (origin or {}).get("run"),
        "params_from": redact((origin or {}).get("fields", {})),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_state(),
        "params": redact(params),
        "seed": seed,
        "versions": versions(),
        "platform": platform.platform(),
        "argv": sys.argv[:1],
    }


def write_provenance(
    folder: str | Path,
    stage: str,
    params: dict,
    seed: int | None = None,
    origin: dict | None = None,
) -> Path:
    """Write ``<folder>/provenance.json`` (``origin``: the profile, run and the file each field came
    from, as :func:`lib.config.resolve` records them) and return its path."""
    path = Path(folder) / "provenance.json"
    write_json(path, provenance(stage, params, seed, origin))
    return path
