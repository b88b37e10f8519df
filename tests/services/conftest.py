"""Fixtures of ``make test-services``: real vLLM servers (text: SmolLM2, vision: the tiny Qwen2-VL)
started once per session from the cached venv ``services/vllm-venv.sh`` builds.

``VQALAB_VLLM_PYTHON`` names that venv's python (the Makefile sets it). Without it these tests
skip, unless ``VQALAB_SERVICES_REQUIRED=1`` (``make test-services``), where they fail instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lib.models.tiny import smollm2_path, tiny_vlm_path

from .servers import vllm_server

# Written by the vLLM venv's python (its transformers has torchvision): what vLLM needs to serve a
# tiny Qwen2-VL folder that the project's own processor class does not give (a video processor,
# and transformers' processor class instead of the image-only one).
_SERVABLE_QWEN = """
import json, shutil, sys
from pathlib import Path
from transformers import Qwen2VLVideoProcessor
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
shutil.copytree(src, dst, dirs_exist_ok=True)
cfg = json.loads((dst / "processor_config.json").read_text())
cfg["processor_class"] = "Qwen2VLProcessor"
(dst / "processor_config.json").write_text(json.dumps(cfg, indent=2))
img = cfg["image_processor"]
Qwen2VLVideoProcessor(**{k: img[k] for k in ("patch_size", "merge_size", "temporal_patch_size", "image_mean",
                                             "image_std", "size")}).save_pretrained(dst)
"""


def _python(var: str, what: str) -> str:
    python = os.environ.get(var)
    if python and Path(python).exists():
        return python
    message = f"{var} is not set to {what}'s python: run `make test-services`"
    if os.environ.get("VQALAB_SERVICES_REQUIRED") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def vllm_python() -> str:
    return _python("VQALAB_VLLM_PYTHON", "the vLLM venv")


@pytest.fixture(scope="session")
def servable_models(vllm_python, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("servable")
    text = root / "smollm2"
    shutil.copytree(smollm2_path(), text)
    vision = root / "qwen2_vl"
    subprocess.run(
        [vllm_python, "-c", _SERVABLE_QWEN, str(tiny_vlm_path("qwen2_vl")), str(vision)], check=True
    )
    return {"text": text, "vision": vision}


@pytest.fixture(scope="session")
def vllm(vllm_python, servable_models, tmp_path_factory):
    """Both servers, started together (one core each) and stopped by PID at the end."""
    logs = tmp_path_factory.mktemp("vllm-logs")
    text = vllm_server(
        vllm_python, servable_models["text"], "smollm2", logs / "text.log", cores="0"
    )
    vision = vllm_server(
        vllm_python,
        servable_models["vision"],
        "qwen2-vl-tiny",
        logs / "vision.log",
        cores="1",
        max_model_len=1024,
    )
    try:
        text.start()
        vision.start()
        text.wait()
        vision.wait()
        print(
            json.dumps(
                {
                    "vllm_ready_s": {
                        "text": round(text.ready_s, 1),
                        "vision": round(vision.ready_s, 1),
                    }
                }
            )
        )
        yield {"text": text, "vision": vision}
    finally:
        text.stop()
        vision.stop()


def spec(server, **kw) -> dict:
    return {
        "backend": "openai",
        "name": server.argv[server.argv.index("--served-model-name") + 1],
        "base_url": server.base_url,
        "max_retries": 1,
        "timeout_s": 120,
        "concurrency": 16,
        **kw,
    }


@pytest.fixture(scope="session")
def label_studio_python() -> str:
    return _python("VQALAB_LABEL_STUDIO_PYTHON", "the Label Studio venv")
