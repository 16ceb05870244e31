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


def check_port(port: int | None, any_free: bool = False) -> None:
    """A TCP port, or None (Gradio's own choice), or 0 where ``any_free``; else a
    ``SettingsError`` naming ``--port``. Why: 70000 reached the socket layer only after the
    library was opened (and the bundled book ingested), and ended in a traceback."""
    low = 0 if any_free else 1
    if port is not None and not low <= port <= 65535:
        free = " (0: any free one)" if any_free else ""
        raise SettingsError(f"--port must be a TCP port from 1 to 65535{free}, got {port}")


SHORT_KEY = 16  # characters; a shorter key is guessable within a rate-limited day or two


def check_exposure(s: Settings, host: str, public: bool, say: Callable[[str], None]) -> None:
    """A server reachable from elsewhere (``host`` not loopback, or a public link) needs
    ``LITRAG_API_KEY`` / ``--api-key``: ``SettingsError`` otherwise. A short key is warned of."""
    if (public or not is_loopback(host)) and not s.api_key:
        where = "a public link" if public else host
        raise SettingsError(
            f"serving on {where} needs an API key (--api-key or LITRAG_API_KEY): it answers "
            "from the whole library"
        )
    if s.api_key and len(s.api_key) < SHORT_KEY:
        say(
            f"warning: the API key has {len(s.api_key)} characters; use {SHORT_KEY} or more, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )


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
    from litrag.app.hosts import allowed_hosts
    from litrag.app.service import ChatService
    from litrag.stores.edge_store import StoreLockedError

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    check_port(port)  # before the library is opened: a bad port changes nothing
    check_exposure(s, host, share, say)
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
            url = launch(
                demo,
                host=host,
                port=port,
                max_mb=s.max_mb,
                share=share,
                password=s.api_key,
                allowed_hosts=allowed_hosts(host, s.allowed_hosts),
            )
        except OSError as exc:
            say(f"error: cannot serve on {host}:{port}: {exc}")
            return 2
        write_ui_file(s.home, url, login=s.api_key is not None)
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
    (``--api-key`` / ``LITRAG_API_KEY``): the API answers from the whole library. The rate
    limit (``rate_per_minute``; None: 60, 0: none) counts each socket's peer, or the address a
    proxy of ``s.trusted_proxies`` forwards."""
    from litrag.app.api import RATE_PER_MINUTE, create_app
    from litrag.app.handoff import running_ui
    from litrag.app.hosts import allowed_hosts
    from litrag.app.service import ChatService
    from litrag.stores.edge_store import StoreLockedError

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    check_port(port, any_free=True)  # before the library is opened
    rate = RATE_PER_MINUTE if rate_per_minute is None else rate_per_minute
    if rate < 0:
        raise SettingsError(f"--rate-limit must be 0 (no limit) or more, got {rate}")
    try:
        check_exposure(s, host, False, say)
    except SettingsError as exc:
        say(f"error: {exc}")
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
            service,
            api_key=s.api_key,
            rate_per_minute=rate,
            allowed_hosts=allowed_hosts(host, s.allowed_hosts),
        )
        server = api_server(app, host, port, s.trusted_proxies)
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
        limit = f"{rate} requests a minute per client" if rate else "off (--rate-limit 0)"
        say(f"rate limit: {limit}")
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


def api_server(app: Any, host: str, port: int, trusted_proxies: str | None = None) -> Any:
    """The uvicorn server of ``litrag serve-api``. uvicorn believes X-Forwarded-For from
    127.0.0.1 by default, so on loopback a client could forge a new address per request and
    never meet the rate limit: the header is read only from ``trusted_proxies`` (comma-
    separated addresses), and otherwise the socket's peer is the client."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=trusted_proxies or "",
    )
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    return server
