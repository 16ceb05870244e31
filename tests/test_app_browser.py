"""The chat in a real headless Chromium (Debian's ``chromium``, driven by playwright without
downloading a browser): type a question, wait for the streamed answer and its sources, save a
screenshot. The UI runs as ``litrag chat`` in its own process, as a reader would start it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_answer import free_port
from test_library import FOOTER
from test_retriever import ingested_shelf

from litrag.app.chat import EXAMPLE_QUESTION
from litrag.app.handoff import running_ui

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
QUESTION = EXAMPLE_QUESTION


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
                "() => document.querySelector('#answered-by').textContent.includes('segmenter')",
                timeout=600_000,
            )
            chat = page.locator("#chat").inner_text()
            page.screenshot(path=str(shot), full_page=True)
            # how it was retrieved waits behind a closed "Details" toggle, shown when opened
            closed = page.locator("#answered-by").inner_text()
            page.locator("#answered-by summary").click()
            page.wait_for_function(
                "() => document.querySelector('#answered-by').innerText.includes('segmenter')"
            )
            line = page.locator("#answered-by").inner_text()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(60)
    print(f"\nscreenshot: {shot}")
    assert "Details" in closed and "segmenter" not in closed and "retrieval:" not in closed
    assert QUESTION in chat and "segmenter: offline" in line
    if mode == "llm":
        assert "LLM: " in line and "extractive" not in line
    else:
        assert "Extractive answer" in chat
    assert shot.stat().st_size > 20_000
    assert not (home / "ui.json").exists()  # removed when the UI stopped


class _Spy(ThreadingHTTPServer):
    """A server the page must never reach: every request to it is counted."""

    daemon_threads = True

    def __init__(self) -> None:
        self.hits: list[str] = []
        spy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                spy.hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_html_in_a_book_is_shown_as_text_never_fetched(books_dir, tmp_path):
    """Issue 33, bug 7: a book passage holding ``<img src=...>`` and a link, quoted in the
    answer bubble and the sources panel, was rendered: the reader's browser fetched the image.
    Now the page shows the markup as text, holds no image or link to that server, and the
    server sees no request."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: run the README's test command (it installs it)")
    from playwright.sync_api import sync_playwright

    spy = _Spy()
    at = f"http://127.0.0.1:{spy.server_address[1]}"
    raw = (books_dir / "pg84_frankenstein.txt").read_bytes().decode("utf-8-sig")
    raw = raw.replace("\r\n", "\n")
    planted = (
        f'The zebrafinch lantern glowed <img src="{at}/spy.png"> over the harbour, and its map '
        f'was at [the chart]({at}/chart) and {at}/plain and <a href="{at}/a">here</a>.'
    )
    cut = raw.index("You will rejoice to hear")
    end = raw.index("\nLetter 2", cut)  # the first letter (the contents list it first)
    book = tmp_path / "pg84.txt"
    book.write_text(raw[:cut] + planted + " " + raw[cut:end] + FOOTER, encoding="utf-8")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_LLM")}
    done = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ingest", "-q", str(book)],
        env={**env, "LITRAG_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    port = free_port()
    proc = start_ui(home, port, env, "--no-llm")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
            page.wait_for_selector("#question textarea", timeout=60_000)
            page.locator("#question textarea").fill("What did the zebrafinch lantern do?")
            page.locator("#ask").click()
            page.wait_for_selector("#sources >> text=[1] Frankenstein", timeout=600_000)
            page.wait_for_function(
                "() => document.querySelector('#answered-by').textContent.includes('segmenter')",
                timeout=600_000,
            )
            page.wait_for_timeout(1500)  # let any image the page holds be requested
            chat = page.locator("#chat").inner_text()
            sources = page.locator("#sources").inner_text()
            images = page.locator(f"#chat img[src^='{at}'], #sources img[src^='{at}']").count()
            links = page.locator(f"#chat a[href^='{at}'], #sources a[href^='{at}']").count()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(60)
        spy.shutdown()
    assert "zebrafinch lantern glowed" in chat  # the extractive answer quotes the sentence
    assert (spy.hits, images, links) == ([], 0, 0)
    assert f'<img src="{at}/spy.png">' in chat and f'<img src="{at}/spy.png">' in sources
    assert "[the chart]" in chat
