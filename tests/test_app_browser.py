"""The chat in a real headless Chromium (Debian's ``chromium``, driven by playwright without
downloading a browser): type a question, wait for the streamed answer and its sources, save a
screenshot. The UI runs as ``litrag chat`` in its own process, as a reader would start it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_answer import free_port
from test_retriever import ingested_shelf

from litrag.app.handoff import running_ui

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
QUESTION = "Who stole Buck from Judge Miller's place?"


def start_ui(home: Path, port: int, env: dict[str, str], *flags: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "litrag.cli", "chat", "--port", str(port), *flags],
        env={**env, "LITRAG_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else ""
        if line.startswith("litrag chat: http"):
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail(f"litrag chat did not come up (rc {proc.poll()})")


@pytest.mark.parametrize("mode", ["extractive", pytest.param("llm", marks=pytest.mark.llm)])
def test_question_in_a_real_browser(mode, books_dir, tmp_path_factory, request):
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: run the README's test command (it installs it)")
    from playwright.sync_api import sync_playwright

    home = tmp_path_factory.mktemp(f"browser-{mode}") / "home"
    shutil.copytree(ingested_shelf(books_dir, tmp_path_factory), home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_LLM")}
    flags: tuple[str, ...] = ("--no-llm",)
    if mode == "llm":
        server = request.getfixturevalue("llama_server")
        env.update(LITRAG_LLM_URL=server.api_base, LITRAG_LLM_MODEL=server.model)
        flags = ()
    port = free_port()
    proc = start_ui(home, port, env, *flags)
    shot = home / "screenshots" / f"chat-{mode}.png"
    shot.parent.mkdir(parents=True)
    try:
        assert running_ui(home) is not None  # the UI says where it runs while it runs
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
            page.wait_for_selector("#question textarea", timeout=60_000)
            assert "The Call of the Wild" in page.locator("#books").inner_text()
            page.locator("#books").get_by_label("The Call of the Wild", exact=False).check()
            page.locator("#books").get_by_label("Alice", exact=False).uncheck()
            page.locator("#question textarea").fill(QUESTION)
            page.locator("#ask").click()
            page.wait_for_selector("#sources >> text=[1] The Call of the Wild", timeout=600_000)
            page.wait_for_function(
                "() => document.querySelector('#answered-by').innerText.includes('segmenter')",
                timeout=600_000,
            )
            chat = page.locator("#chat").inner_text()
            line = page.locator("#answered-by").inner_text()
            page.screenshot(path=str(shot), full_page=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(60)
    print(f"\nscreenshot: {shot}")
    assert QUESTION in chat and "segmenter: offline" in line
    if mode == "llm":
        assert "LLM: " in line and "extractive" not in line
    else:
        assert "Extractive answer" in chat
    assert shot.stat().st_size > 20_000
    assert not (home / "ui.json").exists()  # removed when the UI stopped
