"""Headless Chromium for the page tests (Debian's ``chromium``, driven by playwright).

Without it the tests skip, unless ``VQALAB_BROWSER_REQUIRED=1`` (``.ci/run`` sets it), where they
fail instead: a CI run that forgot to install Chromium must not pass by checking no page.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    """Chromium's path, else a skip (a failure under ``VQALAB_BROWSER_REQUIRED=1``)."""
    if CHROMIUM:
        return CHROMIUM
    message = "Debian chromium is not installed (.ci/run installs it: apt-get install chromium)"
    if os.environ.get("VQALAB_BROWSER_REQUIRED") == "1":
        pytest.fail(f"{message}; VQALAB_BROWSER_REQUIRED=1 makes the page tests required")
    pytest.skip(message)


@contextmanager
def chromium_page(**page_options):
    """A page in a fresh headless Chromium; on leaving, any JavaScript error the page raised fails
    the test."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=require_chromium(), headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(**{"viewport": {"width": 1280, "height": 900}, **page_options})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page
        browser.close()
        assert not errors, f"JavaScript errors: {errors}"
