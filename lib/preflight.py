"""Preflight: before stage 00 computes anything, check that every model, server and key a profile
needs is there, and say in one line per problem which model, which params file, and the fix.

    python -m lib.pipeline --profile real --preflight      # only this check
    make run PROFILE=real                                  # runs it first, stops on a problem

What is checked, per model spec the profile's stages use (each checked once):

- ``hf`` by hub id: in the local hub cache, or (online) reachable with the caller's access
  (``HfApi.auth_check`` with ``$HF_TOKEN``: a gated model whose licence is not accepted, a misspelt
  id, an unreachable hub - each its own message). A local folder must exist and hold ``config.json``.
  Outputs of the run itself (``stage:``) are made later and skipped; ``run:`` outputs of earlier runs
  must exist.
- ``openai``: the key variable named by ``api_key_env`` is set (a ``base_url`` server without a key
  accepts any), and a ``base_url`` server answers ``GET /models`` - every server of a list.
- hub ids in plain string fields (``clip_model``; a task option such as ``bertscore_model``): the
  configs' :meth:`~lib.config.StageConfig.hub_ids`.

A stage run on its own checks the outputs of runs it reads where it uses them, before it starts
(:func:`lib.artifacts.missing_models`: stage 06's models named ``stage:`` or ``run:``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lib import artifacts as A
from lib.paths import outputs_root

TIMEOUT_S = 10.0  # a server or hub that does not answer in this long is reported, not waited for


def _is_local(name: str) -> bool:
    """A folder, not a hub id (``owner/name``, or a legacy one-word id such as ``roberta-large``)."""
    return (
        name.startswith(("/", ".", "~")) or name.count("/") > 1 or Path(name).expanduser().exists()
    )


def hub_problem(name: str, offline: bool) -> str | None:
    """Why the hub id or folder ``name`` cannot be loaded here, or None."""
    if name.startswith("stage:"):
        return None  # made by this run
    if name.startswith("run:"):
        path = Path(A.resolve(name, outputs_root()))
        return (
            None if path.exists() else f"{path} does not exist: run the profile that makes it first"
        )
    if _is_local(name):
        return A.model_folder_problem(Path(name).expanduser(), "a hub id is owner/name")
    from huggingface_hub import HfApi, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return None
    env_offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if offline or env_offline:
        why = "the profile is offline" if offline else "HF_HUB_OFFLINE is set"
        return (
            f"not in the local hub cache ({os.environ.get('HF_HOME', '~/.cache/huggingface')}) and {why}: "
            f"download it once (hf download {name}) or go online"
        )
    token = os.environ.get("HF_TOKEN") or None
    try:
        HfApi().auth_check(name, token=token)
    except GatedRepoError:
        return (
            f"gated: accept its licence at https://huggingface.co/{name} and export HF_TOKEN "
            f"(a token of that account{'' if token else '; HF_TOKEN is not set'})"
        )
    except RepositoryNotFoundError:
        return f"no such model on the hub (misspelt? a private model needs HF_TOKEN{'' if token else ', not set'})"
    except HfHubHTTPError as e:
        return f"the hub refused ({type(e).__name__}: {str(e)[:120]}): check HF_TOKEN and the id"
    except Exception as e:  # noqa: BLE001 - the transport raises its own types (httpx, ssl, socket): all mean "no hub"
        return (
            f"the hub is unreachable ({type(e).__name__}): check the connection, or download it where there "
            f"is one and set offline: true"
        )
    return None


def server_problem(spec: dict) -> str | None:
    """Why an ``openai`` spec cannot be served: a missing key variable, a silent server (each
    server of a ``base_url`` list is asked; every silent one is named)."""
    env = spec.get("api_key_env", "OPENAI_API_KEY")
    base = spec.get("base_url")
    if not base and not os.environ.get(env):
        return f"{env} is not set: export it (the spec's api_key_env names the variable holding the key)"
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
        return f"no server answers at {base} ({type(e).__name__}): start it (e.g. vllm serve {spec.get('name')}) or fix base_url"
    if r.status_code in (401, 403):
        return f"{base} refused the key in {env} (HTTP {r.status_code})"
    if r.status_code >= 400:
        return f"{base}/models answered HTTP {r.status_code}: is base_url the server's /v1?"
    return None


def problem(spec: dict, offline: bool) -> str | None:
    if spec.get("backend") == "hf":
        return hub_problem(str(spec["name"]), offline)
    if spec.get("backend") == "openai":
        return server_problem(spec)
    return None  # tiny, constant, random: nothing to reach


def _specs(value):
    if isinstance(value, dict) and "backend" in value:
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _specs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _specs(v)


def uses(steps) -> list[tuple[str, dict | str, str]]:
    """(what, spec or hub id, params file) for every model the resolved stages use, each once: the
    profile's models they name first (their file is the profile's), then specs written in a stage file."""
    seen, out = set(), []
    for step in steps:
        prof = step.resolved.profile
        for name in sorted(step.resolved.refs):
            spec = prof.models[name]
            key = json.dumps(spec, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                out.append(
                    (
                        f"model {name!r} ({spec.get('name', spec.get('backend'))})",
                        spec,
                        f"{prof.source.name} models.{name}",
                    )
                )
    for step in steps:
        cfg, origins = step.resolved.cfg, step.resolved.origins
        for field in type(cfg).MODEL_ROLES:
            for spec in _specs(getattr(cfg, field)):
                key = json.dumps(spec, sort_keys=True, default=str)
                if key not in seen:
                    seen.add(key)
                    out.append(
                        (
                            f"{step.stage} {field} {spec.get('name', spec.get('backend'))!r}",
                            spec,
                            origins.get(field, "the class default"),
                        )
                    )
        for field, name in cfg.hub_ids().items():
            if name not in seen:
                seen.add(name)
                out.append(
                    (
                        f"{step.stage} {field} {name!r}",
                        name,
                        origins.get(field.split(".")[0], "the class default"),
                    )
                )
    return out


def check(steps, offline: bool) -> list[str]:
    """One line per problem: the model, the params file that names it, the fix."""
    lines = []
    for what, spec, source in uses(steps):
        why = hub_problem(spec, offline) if isinstance(spec, str) else problem(spec, offline)
        if why:
            lines.append(f"{what} ({source}): {why}")
    return lines
