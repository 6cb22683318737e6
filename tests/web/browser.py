"""Debian's chromium, driven by Playwright (its own browser download cannot work here), and
where the browser tests leave their screenshots."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "no chromium: `bash scripts/web/install-browser.sh` (as root) installs it"
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the browser tests' chromium: {message}")
        pytest.skip(message)
    return found


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    path = chromium_path()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path)
        try:
            yield browser
        finally:
            await browser.close()


def screenshot_path(name: str) -> str:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return str(SCREENSHOTS / f"{name}.png")
