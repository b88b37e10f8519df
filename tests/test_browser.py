"""The annotation widget in a real JupyterLab (127.0.0.1) driven by headless Chromium (Debian's
`chromium`, through playwright): fill one annotation, save, and find it in annotations.jsonl."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("chromium")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook(path: Path, image: Path, store: Path) -> None:
    source = (
        f"from lib.stages.annotate import AnnotationStore\n"
        f"from lib.pages.annotation_widget import AnnotationWidget\n"
        f"w = AnnotationWidget([{{'id': 'pair-1', 'path': {str(image)!r}}}], AnnotationStore({str(store)!r}),\n"
        f"                     fields=['left_description', 'difficulty', 'satirical']).show()"
    )
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "c1",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
        ],
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "name": "python3",
            }
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


@pytest.fixture
def lab(tmp_path):
    port, token = _free_port(), "vqalab-test-token"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            f"--IdentityProvider.token={token}",
            "--allow-root",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.news_url=",
            "--LabApp.collaborative=False",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "lab.log", "w"),  # noqa: SIM115 - the server process writes it until it stops
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=1)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"JupyterLab did not start: {(tmp_path / 'lab.log').read_text()[-2000:]}")
    yield url, token, tmp_path
    proc.terminate()
    proc.wait(10)


@pytest.mark.slow
def test_fill_one_annotation_in_jupyterlab(lab, chromium):
    from PIL import Image
    from playwright.sync_api import sync_playwright

    from lib.families.yesbut.panels import compose

    url, token, root = lab
    image, store = root / "pair.png", root / "annotations.jsonl"
    compose(Image.new("RGB", (80, 80), "red"), Image.new("RGB", (80, 80), "blue")).save(image)
    _notebook(root / "annotate.ipynb", image, store)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{url}/lab/tree/annotate.ipynb?token={token}", timeout=60_000)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_selector(
            ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
        )
        # run the cell; the kernel may still be starting, so run it again until the widget appears. On a
        # busy machine JupyterLab may ask first (e.g. which kernel, when it is slow to start): its
        # default answer, as a user would press Enter, and its text kept for a failure's message
        dialogs = []
        for _attempt in range(6):
            if page.locator(".jp-Dialog").count():
                dialogs.append(page.inner_text(".jp-Dialog"))
                page.click(".jp-Dialog .jp-mod-accept")
            try:
                page.click(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=10_000)
            except Exception:
                continue  # a dialog opened meanwhile: answered on the next pass
            page.keyboard.press("Shift+Enter")
            try:
                page.wait_for_selector(".vqalab-annotator input", timeout=20_000)
                break
            except Exception:
                continue
        else:
            page.screenshot(path=str(root / "failed.png"))
            raise AssertionError(
                f"the widget did not render; dialogs: {dialogs}; "
                f"notebook text: {page.inner_text('.jp-Notebook')[-1500:]}"
            )
        page.fill(".vqalab-annotator input", "tester")
        page.fill(".vqalab-field-left_description textarea", "a red square")
        page.click(".vqalab-field-difficulty button:has-text('MEDIUM')")
        page.click(".vqalab-field-satirical button:has-text('yes')")
        page.click(".vqalab-save")
        for _ in range(60):
            if store.exists() and len(store.read_text().splitlines()) >= 3:
                break
            time.sleep(0.5)
        status = page.inner_text(".widget-vbox")
        browser.close()
    rows = [json.loads(line) for line in store.read_text().splitlines()]
    got = {r["field"]: r["value"] for r in rows}
    assert got == {"left_description": "a red square", "difficulty": "MEDIUM", "satirical": True}, (
        status
    )
    assert {r["annotator"] for r in rows} == {"tester"} and {r["item"] for r in rows} == {"pair-1"}
    assert all(r["source"] == "human" for r in rows)
