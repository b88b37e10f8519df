"""Probes a backend's preflight (:meth:`lib.models.backend.Model.preflight`) uses: can a hub id or
folder be loaded here, does an OpenAI-compatible server answer with the key it is given. Each
returns one line saying what is wrong and the fix, or None; none loads a model.
:mod:`lib.pipeline.preflight` asks every backend before a run computes anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from lib.core.paths import outputs_root
from lib.io import artifacts

TIMEOUT_S = 10.0  # a server or hub that does not answer in this long is reported, not waited for


def _is_local(name: str) -> bool:
    """A folder, not a hub id (``owner/name``, or a legacy one-word id such as ``roberta-large``)."""
    return (
        name.startswith(("/", ".", "~")) or name.count("/") > 1 or Path(name).expanduser().exists()
    )


def hub_problem(name: str, offline: bool) -> str | None:
    """Why the hub id or folder ``name`` cannot be loaded here, or None. Outputs of the run itself
    (``stage:``) are made later and pass; ``run:`` outputs of earlier runs must exist; a folder must
    hold ``config.json``; a hub id must be in the local hub cache or (online) reachable with the
    caller's access (``$HF_TOKEN``)."""
    if name.startswith("stage:"):
        return None  # made by this run
    if name.startswith("run:"):
        path = Path(artifacts.resolve(name, outputs_root()))
        return (
            None if path.exists() else f"{path} does not exist: run the profile that makes it first"
        )
    if _is_local(name):
        return artifacts.model_folder_problem(Path(name).expanduser(), "a hub id is owner/name")
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return None
    env_offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if offline or env_offline:
        why = "the profile is offline" if offline else "HF_HUB_OFFLINE is set"
        return (
            f"not in the local hub cache ({os.environ.get('HF_HOME', '~/.cache/huggingface')}) "
            f"and {why}: download it once (hf download {name}) or go online"
        )
    return _hub_access(name)


def _hub_access(name: str) -> str | None:
    """Why the hub does not let the caller (``$HF_TOKEN``) read ``name``: gated, missing, refused
    or unreachable, each its own message; None when it does."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    token = os.environ.get("HF_TOKEN") or None
    try:
        HfApi().auth_check(name, token=token)
    except GatedRepoError:
        return (
            f"gated: accept its licence at https://huggingface.co/{name} and export HF_TOKEN "
            f"(a token of that account{'' if token else '; HF_TOKEN is not set'})"
        )
    except RepositoryNotFoundError:
        return (
            f"no such model on the hub (misspelt? a private model needs "
            f"HF_TOKEN{'' if token else ', not set'})"
        )
    except HfHubHTTPError as e:
        return f"the hub refused ({type(e).__name__}: {str(e)[:120]}): check HF_TOKEN and the id"
    # the transport raises its own types (httpx, ssl, socket): all mean "no hub"
    except Exception as e:  # noqa: BLE001
        return (
            f"the hub is unreachable ({type(e).__name__}): check the connection, or download it "
            f"where there is one and set offline: true"
        )
    return None


def server_problem(spec: dict) -> str | None:
    """Why an ``openai`` spec cannot be served: a missing key variable, a silent server (each
    server of a ``base_url`` list is asked; every silent one is named)."""
    env = spec.get("api_key_env", "OPENAI_API_KEY")
    base = spec.get("base_url")
    if not base and not os.environ.get(env):
        return (
            f"{env} is not set: export it (the spec's api_key_env names the variable holding "
            f"the key)"
        )
    if spec.get("api_key_env") and not os.environ.get(env):
        return f"{env} is not set: export it, or drop api_key_env for a local server without a key"
    if not base:
        return None
    bases = base if isinstance(base, list) else [base]
    problems = [p for p in (_silent_server(b, spec, env) for b in bases) if p]
    if problems and len(bases) > 1:
        problems[0] = f"{len(problems)} of the {len(bases)} servers of base_url: {problems[0]}"
    return "; ".join(problems) or None


def _silent_server(base: str, spec: dict, env: str) -> str | None:
    """Why the server at ``base`` does not answer ``GET /models`` as an OpenAI-compatible one does."""
    import httpx

    headers = {"Authorization": f"Bearer {os.environ[env]}"} if os.environ.get(env) else {}
    try:
        r = httpx.get(
            base.rstrip("/") + "/models", headers=headers, timeout=TIMEOUT_S, trust_env=False
        )
    except httpx.HTTPError as e:
        return (
            f"no server answers at {base} ({type(e).__name__}): start it "
            f"(e.g. vllm serve {spec.get('name')}) or fix base_url"
        )
    if r.status_code in (401, 403):
        return f"{base} refused the key in {env} (HTTP {r.status_code})"
    if r.status_code >= 400:
        return f"{base}/models answered HTTP {r.status_code}: is base_url the server's /v1?"
    return None
