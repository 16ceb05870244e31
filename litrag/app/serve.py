"""``litrag chat``: open the library (ingesting the bundled book into an empty one), start the
LLM, serve the UI until Ctrl-C or SIGTERM, and leave ``ui.json`` behind only while serving."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from litrag.builders import AnswerLLM, build_answer_llm
from litrag.settings import Settings, SettingsError

BUNDLED_BOOK = Path(__file__).resolve().parent.parent / "data" / "pg215_call_of_the_wild.txt"


def start_llm(
    s: Settings, no_llm: bool, say: Callable[[str], None]
) -> tuple[AnswerLLM | None, str]:
    """The answering LLM, or None and why (answers are then extractive, labelled so)."""
    from litrag.models.llama_server import LocalModelError
    from litrag.models.served import BackendError
    from litrag.settings import llm_backend

    if no_llm:
        return None, "--no-llm"
    if llm_backend(s) == "local":
        say(f"starting the local LLM ({s.local_llm}) ...")
    try:
        return build_answer_llm(s), ""
    except BackendError as exc:
        say(f"warning: {exc}; answers will be extractive")
        return None, str(exc)
    except (LocalModelError, ImportError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        say(f"warning: the local LLM did not start ({first}); answers will be extractive")
        return None, f"the local LLM did not start: {first}"


def check_port(port: int | None) -> None:
    """A TCP port, or None (Gradio's own choice); else a ``SettingsError`` naming ``--port``.
    Why: 70000 reached the socket layer only after the library was opened and the bundled book
    ingested, and ended in a traceback."""
    if port is not None and not 1 <= port <= 65535:
        raise SettingsError(f"--port must be a TCP port from 1 to 65535, got {port}")


def run_chat(
    s: Settings,
    *,
    host: str = "127.0.0.1",
    port: int | None = 7860,
    paths: Sequence[Path] = (),
    no_llm: bool = False,
    share: bool = False,
    ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Serve until ``stop`` is set (or a signal); returns the exit status."""
    from litrag.app.chat import build_app, launch
    from litrag.app.handoff import remove_ui_file, running_ui, write_ui_file
    from litrag.app.service import ChatService
    from litrag.stores.edge_store import StoreLockedError

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    check_port(port)  # before the library is opened: a bad port changes nothing
    try:
        service = ChatService(s)
    except StoreLockedError as exc:
        ui = running_ui(s.home)
        if ui is not None:
            say(f"error: {ui.describe()} already serves the library {s.home}: open {ui.url}")
        else:
            say(f"error: {exc}")
        return 2
    answer_llm: AnswerLLM | None = None
    try:
        wanted = list(paths)
        if not wanted and not service.books():
            say(f"the library {s.home} is empty: ingesting the bundled {BUNDLED_BOOK.name}")
            wanted = [BUNDLED_BOOK]
        if wanted:
            report = service.library().ingest(wanted, on_event=say, show_progress=True)
            for _path, reason in report.failed:
                say(f"error: {reason}")
            if not service.books():
                say("error: no book could be ingested; nothing to chat about")
                return 1
        answer_llm, note = start_llm(s, no_llm, say)
        service.answer_llm, service.llm_note = answer_llm, note or None
        demo = build_app(service)
        try:
            url = launch(demo, host=host, port=port, max_mb=s.max_mb, share=share)
        except OSError as exc:
            say(f"error: cannot serve on {host}:{port}: {exc}")
            return 2
        write_ui_file(s.home, url)
        print(f"litrag chat: {url}  (library {s.home}; LLM: {service.llm_line()})", flush=True)
        if ready is not None:
            ready(url)
        stop = stop or threading.Event()
        _on_signals(stop)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        say("stopping the chat UI ...")
        remove_ui_file(s.home)
        demo.close()
        return 0
    finally:
        remove_ui_file(s.home)
        service.close()  # closes the LLM server too


def _on_signals(stop: threading.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(*_: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve to anything
        return False


def run_api(
    s: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    no_llm: bool = False,
    rate_per_minute: int | None = None,
    ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """``litrag serve-api``: the OpenAI-compatible API (``litrag.app.api``) until ``stop`` is
    set (or a signal); returns the exit status. A host other than loopback needs an API key
    (``--api-key`` / ``LITRAG_API_KEY``): the API answers from the whole library."""
    import uvicorn

    from litrag.app.api import RATE_PER_MINUTE, create_app
    from litrag.app.handoff import running_ui
    from litrag.app.service import ChatService
    from litrag.stores.edge_store import StoreLockedError

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if not is_loopback(host) and not s.api_key:
        say(f"error: serving on {host} needs an API key (--api-key or LITRAG_API_KEY)")
        return 2
    try:
        service = ChatService(s)
    except StoreLockedError as exc:
        ui = running_ui(s.home)
        say(f"error: {ui.describe()} holds the library {s.home}" if ui else f"error: {exc}")
        return 2
    try:
        if not service.books():
            say(f"error: the library {s.home} has no books: `litrag ingest` some first")
            return 1
        service.answer_llm, note = start_llm(s, no_llm, say)
        service.llm_note = note or None
        app = create_app(
            service, api_key=s.api_key, rate_per_minute=rate_per_minute or RATE_PER_MINUTE
        )
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        thread = threading.Thread(target=server.run, name="litrag-api", daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                say(f"error: cannot serve on {host}:{port}")
                return 2
            time.sleep(0.05)
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
        url = f"http://{host}:{bound}/v1"
        print(f"litrag serve-api: {url}  (library {s.home}; LLM: {service.llm_line()})", flush=True)
        if ready is not None:
            ready(url)
        stop = stop or threading.Event()
        _on_signals(stop)
        try:
            while not stop.wait(0.5) and thread.is_alive():
                pass
        except KeyboardInterrupt:
            pass
        say("stopping the API ...")
        server.should_exit = True
        thread.join(timeout=10)
        return 0
    finally:
        service.close()
