"""Finding a running chat UI and asking through it.

The embedded store admits one process. While ``litrag chat`` holds it, the UI writes its URL and
pid to ``$LITRAG_HOME/ui.json`` (removed at exit); ``litrag ask`` reads it when the store is
locked and asks the UI's ``/answer`` API instead (the same engine, the same library), and writing
commands name the UI in their error. Imports nothing heavy: the CLI loads it on every lock error.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UI_FILE = "ui.json"
API_NAME = "/answer"


@dataclass
class RunningUI:
    """A chat UI that holds the library at ``home``."""

    url: str
    pid: int
    host: str
    since: str
    login: bool = False  # the UI asks for the API key (served beyond loopback)

    def describe(self) -> str:
        return f"the litrag chat UI (pid {self.pid}, {self.url})"


def ui_file(home: Path) -> Path:
    return Path(home) / UI_FILE


def write_ui_file(home: Path, url: str, login: bool = False) -> Path:
    path = ui_file(home)
    data = {
        "url": url,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "login": login,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)
    return path


def remove_ui_file(home: Path) -> None:
    """Remove ``ui.json`` if this process wrote it (never another UI's)."""
    path = ui_file(home)
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def running_ui(home: Path) -> RunningUI | None:
    """The UI named in ``ui.json`` when that process is alive on this host, else None."""
    try:
        d = json.loads(ui_file(home).read_text(encoding="utf-8"))
        ui = RunningUI(
            url=str(d["url"]),
            pid=int(d["pid"]),
            host=str(d["host"]),
            since=d["since"],
            login=bool(d.get("login", False)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if ui.host != socket.gethostname() or not _alive(ui.pid):
        return None
    return ui


class UIError(RuntimeError):
    """The UI could not be reached, or refused the question (bad input); one line."""


class RemoteAnswerStream:
    """Like ``AnswerStream``, for an answer computed by a running UI: iterate for text pieces,
    then ``answer()``."""

    def __init__(self, job: Any) -> None:
        self._job = job
        self._text = ""
        self._final: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[str]:
        for raw in self._job:
            msg = json.loads(raw)
            if msg.get("input_error"):
                raise UIError(msg["input_error"])
            text = msg.get("text", "")
            if text.startswith(self._text) and len(text) > len(self._text):
                piece, self._text = text[len(self._text) :], text
                yield piece
            if msg.get("answer") is not None:
                self._final = msg["answer"]
        if self._final is None:
            raise UIError("the UI ended the answer without a result")

    def answer(self) -> Any:
        from litrag.answering.answer import Answer

        if self._final is None:
            for _ in self:
                pass
        return Answer.model_validate(self._final)


def ask_via_ui(
    ui: RunningUI,
    question: str,
    book_ids: Sequence[str],
    *,
    upto_chapter: int | None = None,
    use_llm: bool = True,
    retrieval: str | None = None,
    top_k: int | None = None,
    api_key: str | None = None,
) -> RemoteAnswerStream:
    """Start the question on the UI's ``/answer`` API (gradio_client, over localhost); a UI
    that asks for a login gets ``api_key`` (``LITRAG_API_KEY``)."""
    try:
        from gradio_client import Client
    except ImportError as exc:  # pragma: no cover - part of the app extra
        raise UIError(f"gradio_client is missing ({exc}): pip install 'litrag[app]'") from exc
    if ui.login and not api_key:
        raise UIError(f"{ui.describe()} asks for the API key: set LITRAG_API_KEY to ask through it")
    try:
        auth = ("litrag", api_key) if ui.login and api_key else None
        client = Client(ui.url, verbose=False, auth=auth)
    except Exception as exc:
        raise UIError(f"cannot reach {ui.describe()}: {type(exc).__name__}: {exc}") from exc
    job = client.submit(
        question=question,
        books=list(book_ids),
        upto_chapter=upto_chapter,
        use_llm=use_llm,
        retrieval=retrieval or "",
        top_k=top_k or 0,
        api_name=API_NAME,
    )
    return RemoteAnswerStream(job)
