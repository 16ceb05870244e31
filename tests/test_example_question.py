"""The question the chat suggests, asked as a newcomer first asks it: the whole bundled book, the
chat's own service with default settings, the packaged local LLM (Qwen2.5-Coder-1.5B on
llama.cpp). A wrong answer to the page's own example is the first thing a reader would meet."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from litrag.app.chat import EXAMPLE_QUESTION
from litrag.app.serve import BUNDLED_BOOK, start_llm
from litrag.app.service import ChatService
from litrag.settings import Settings

WILD = "pg215"
# Curly, friendly to a husky, is knocked off her feet and torn apart by the pack (chapter II).
# A right answer says she was attacked or killed, and by the dogs; either alone is not enough.
BY_DOGS = re.compile(r"\b(husk(y|ies)|dogs?|pack|wolf|wolves|team)\b", re.I)
KILLED = re.compile(
    r"\b(attack|kill|tore|torn|tear|rip|bit|bite|maul|savag|slash|knock|overw|trampl|"
    r"fell upon|set upon|rushed|leap|lunge|fight|fought|mangl)",
    re.I,
)
DECLINED = re.compile(r"do(es)? not (say|provide|mention)|not (stated|mentioned)|cannot", re.I)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatService]:
    """What `litrag chat` does on an empty library with default settings: the bundled book,
    whole, ingested through the service, then the LLM started as the chat starts it (no server
    configured: the packaged model on llama.cpp)."""
    home = tmp_path_factory.mktemp("example") / "home"
    settings = Settings(home=home)
    svc = ChatService(settings)
    try:
        report = svc.library().ingest([BUNDLED_BOOK])
        assert report.ok and report.ingested == [WILD], report.failed
        svc.answer_llm, note = start_llm(settings, False, print)
        assert svc.answer_llm is not None, note
        yield svc
    finally:
        svc.close()


def test_the_patterns_tell_right_from_wrong():
    """The check can fail: a decline, a wrong cause and a bare restatement are not right."""
    right = "Curly was attacked by a husky and then torn apart by the pack of dogs."
    assert BY_DOGS.search(right) and KILLED.search(right) and not DECLINED.search(right)
    for wrong in (
        "The passages do not say how Curly died.",
        "Curly died of the cold in the snow.",
        "Curly died.",
    ):
        assert not (BY_DOGS.search(wrong) and KILLED.search(wrong) and not DECLINED.search(wrong))


@pytest.mark.quick
@pytest.mark.llm
def test_the_chat_example_is_answered_right(service: ChatService):
    # the default path: the packaged model, no server configured
    assert "qwen2.5-coder-1.5b" in service.llm_line().lower(), service.llm_line()
    started = time.monotonic()
    stream, standalone = service.ask(EXAMPLE_QUESTION, [WILD])
    text = "".join(stream)
    answer = service.finished(stream, EXAMPLE_QUESTION, standalone)
    seconds = time.monotonic() - started
    print(f"\n{EXAMPLE_QUESTION} -> {answer.text!r} ({seconds:.0f} s)")
    assert answer.error is None and answer.mode != "extractive", answer
    assert text.strip() and answer.withheld == [], answer
    assert not DECLINED.search(answer.text), answer.text
    assert BY_DOGS.search(answer.text) and KILLED.search(answer.text), answer.text
    # it was read in chapter II, where Curly dies, not made up
    assert any(s.chapter_index == 2 for s in answer.sources), answer.sources


def test_the_readme_asks_the_same_question():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert EXAMPLE_QUESTION in readme
