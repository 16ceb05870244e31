"""The Gradio chat, launched in the test and driven through ``gradio_client`` as a browser would:
ask (extractive, and the real llama.cpp server, through OpenAILike and llama-index-llms-vllm),
follow-ups, book selection and chapters, the spoiler limit, uploads (a real book, and a PNG named
.txt), bad input, ten concurrent sessions, LLM failures (unreachable, stalling mid-answer), and
``litrag ask`` / ``ingest`` / ``remove`` while the UI holds the embedded store."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from llm_server import API_KEY
from test_answer import FATHER, free_port
from test_library import short_book
from test_retriever import ALICE, WILD, ingested_shelf

from litrag.app.chat import build_app, launch, render_text
from litrag.app.handoff import remove_ui_file, running_ui, write_ui_file
from litrag.app.service import ChatService
from litrag.builders import AnswerLLM, build_answer_llm
from litrag.ingestion.library import Library
from litrag.models.llama_server import openai_like
from litrag.retrieval.retriever import UnknownBookError
from litrag.settings import Settings

CAUCUS = "What is a Caucus-race, and who wins it?"  # Alice, chapter III


@pytest.fixture(scope="module")
def app(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """The shortened two-book shelf, copied (uploads change it), served on a free port."""
    home = tmp_path_factory.mktemp("app") / "home"
    shutil.copytree(ingested_shelf(books_dir, tmp_path_factory), home)
    # the tests swap in LLM servers (SmolLM2, a stalling one), which read every block a server
    # is given; the packaged model's word budget is test_answer's
    service = ChatService(Settings(home=home, read_words=0))
    demo = build_app(service)
    url = launch(demo, port=free_port())
    write_ui_file(home, url)
    try:
        yield SimpleNamespace(url=url, service=service, home=home)
    finally:
        remove_ui_file(home)
        demo.close()
        service.close()


@contextmanager
def answering_with(service: ChatService, llm, description: str) -> Iterator[None]:
    """Swap the process's LLM for one test (the service is shared by the module)."""
    before = service.answer_llm
    service.answer_llm = AnswerLLM(llm, description)
    try:
        yield
    finally:
        service.answer_llm = before


def chat(client: Client, question: str, books: list[str], upto: int = 3, history=()):
    """One Ask click: (textbox, chat, sources markdown, answered-by line, answer dict).

    ``upto`` at the shelf's last chapter (3) reads as no limit."""
    return client.predict(question, list(history), books, upto, api_name="/chat")


def text_of(message: dict) -> str:
    """A chat message's text (Gradio sends content as a list of typed parts)."""
    content = message["content"]
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def png_bytes() -> bytes:
    """A real 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


# ----------------------------------------------------------------------------- asking
def test_extractive_answer_with_sources_and_backends(app):
    client = Client(app.url, verbose=False)
    box, history, sources, line, answer = chat(client, FATHER, [WILD])
    assert box == ""
    assert answer["mode"] == "extractive" and "St. Bernard" in answer["text"]
    assert [m["role"] for m in history][:2] == ["user", "assistant"]
    assert text_of(history[0]) == FATHER and "St. Bernard" in text_of(history[1])
    (src,) = answer["sources"]
    assert src["book_id"] == WILD and src["chapter_index"] == 1
    assert "[1] The Call of the Wild" in sources and f"sentences {src['sentence_from']}" in sources
    assert "**" in sources  # the evidence sentences are in bold in the passage
    assert "LLM: extractive" in line and "segmenter: offline" in line
    assert "no reranker" in line and "no spoiler limit" in line


def test_follow_up_is_searched_with_the_previous_question(app):
    client = Client(app.url, verbose=False)
    _, history, *_ = chat(client, FATHER, [WILD])
    _, history, _, line, second = chat(client, "And his mother?", [WILD], history=history)
    assert "searched for: “What kind of dog was Buck's father? And his mother?”" in line
    assert second["question"] == "And his mother?"
    assert second["standalone_question"] == f"{FATHER} And his mother?"
    users = [text_of(m) for m in history if m["role"] == "user"]
    assert users == [FATHER, "And his mother?"]
    # a new session has no history: the same words are searched as typed
    _, _, _, line, _ = chat(Client(app.url, verbose=False), "And his mother?", [WILD])
    assert "searched for" not in line


def test_a_chat_builds_its_engine_once_and_reads_the_registry_once_a_question(app, monkeypatch):
    """Five questions of one conversation: one engine (built on the first), one registry read
    per question; a new spoiler limit is another engine."""
    from litrag.app import service as service_module

    built, reads = [], []
    build = service_module.build_routed_engine
    read = Library.read_registry

    def counting_build(*args, **kwargs):
        built.append(kwargs.get("upto_chapter"))
        return build(*args, **kwargs)

    def counting_read(home):
        reads.append(home)
        return read(home)

    monkeypatch.setattr(service_module, "build_routed_engine", counting_build)
    monkeypatch.setattr(Library, "read_registry", staticmethod(counting_read))
    app.service._engines.clear()
    client = Client(app.url, verbose=False)
    history: list = []
    questions = [FATHER, "Who is Buck?", "Who stole Buck?", "Where did Buck live?", CAUCUS]
    for q in questions:
        _, history, _, _, answer = chat(client, q, [WILD], upto=1, history=history)
        assert answer["sources"] and all(s["chapter_index"] <= 1 for s in answer["sources"])
    assert built == [1]
    asked = len(reads)
    app.service.ask("Who is Buck?", [WILD], upto_chapter=2)
    assert built == [1, 2] and len(reads) == asked + 1


def test_select_books_lists_chapters_and_sets_the_slider(app):
    client = Client(app.url, verbose=False)
    slider, chapters = client.predict([ALICE, WILD], 1, api_name="/select_books")
    assert "Alice" in chapters and "The Call of the Wild" in chapters
    assert "Down the Rabbit-Hole" in chapters and "Into the Primitive" in chapters
    assert (slider["maximum"], slider["value"]) == (3, 1)  # a limit the reader set is kept
    slider, chapters = client.predict([WILD], 3, api_name="/select_books")
    assert (slider["maximum"], slider["value"]) == (2, 2) and "Alice" not in chapters


def test_spoiler_limit_is_respected(app):
    client = Client(app.url, verbose=False)
    *_, line, free = chat(client, CAUCUS, [ALICE], upto=3)  # right end: no limit
    assert free["upto_chapter"] is None and free["sources"][0]["chapter_index"] == 3
    *_, line, limited = chat(Client(app.url, verbose=False), CAUCUS, [ALICE], upto=1)
    assert limited["upto_chapter"] == 1 and "spoiler limit: up to chapter 1" in line
    assert limited["sources"] and all(s["chapter_index"] <= 1 for s in limited["sources"])
    # two books, one limit: nothing past chapter 1 of either
    body = app.service.ask(CAUCUS, [ALICE, WILD], upto_chapter=1, use_llm=False)[0]
    assert all(s.chapter_index <= 1 for s in body.answer().sources)


def named(word: str, text: str) -> bool:
    """``word`` as a word of ``text`` (chapter I's "Spitzbergen" does not name Spitz)."""
    return re.search(rf"\b{re.escape(word)}\b", text) is not None


def test_no_listing_names_what_comes_after_the_spoiler_limit(app):
    """Issue 33, bug 8: with the slider at chapter 1, no panel, endpoint or CLI listing shows a
    chapter title or a character of chapter 2 on: the Chapters panel listed every title, and
    ``/profile`` with an unknown value answered Gradio's refusal listing every character."""
    from litrag.narrative.index import load_index

    index = load_index(app.home, WILD)
    assert index is not None
    met = {c.id for c in index.upto(1)}
    later = [c for c in index.characters if c.id not in met]
    later_titles = [t for i, t in app.service.chapters(WILD) if i > 1]
    assert later and later_titles
    client = Client(app.url, verbose=False)
    replies = [
        client.predict([WILD], 1, api_name="/select_books"),
        client.predict([WILD], 1, api_name="/chapters"),
        client.predict([WILD], 1, api_name="/characters"),
        client.predict([WILD], 1, f"{WILD}:{later[0].id}", api_name="/profile"),
        client.predict([WILD], 1, f"{WILD}:nobody-of-this-name", api_name="/profile"),
        client.predict([WILD], 1, "not a character", api_name="/profile"),
    ]
    # the answers: the chat panel (bubble, sources, answered-by line), the /answer API, and
    # `litrag ask` (through the UI, which holds the library), text and JSON, routed or not
    story = "What happens to Buck?"
    replies += [
        chat(client, story, [WILD], upto=1),
        answer_api(client, question=story, upto_chapter=1),
    ]
    ask = ["ask", story, "--book", WILD, "--upto-chapter", "1", "--no-llm"]
    listings = [["characters", WILD, "--upto-chapter", "1", *a] for a in ([], ["--json"])]
    listings += [[*ask, *a] for a in ([], ["--json"], ["--no-route"], ["--full"])]
    for args in [*listings, ["books"]]:
        proc = litrag(app.home, *args)
        assert proc.returncode == 0, proc.stderr
        replies.append(proc.stdout + proc.stderr)
    # asked about someone met later: the reply names them (the reader did) but nobody else later
    who = f"Who is {later[0].name}?"
    echoed = [chat(client, who, [WILD], upto=1), answer_api(client, question=who, upto_chapter=1)]
    for args in ([], ["--json"]):
        proc = litrag(
            app.home, "ask", who, "--book", WILD, "--upto-chapter", "1", "--no-llm", *args
        )
        echoed.append(proc.stdout + proc.stderr)
    said = json.dumps(echoed, ensure_ascii=False)
    leaked = [w for w in later_titles + [c.name for c in later[1:]] if named(w, said)]
    assert not leaked, leaked
    text = json.dumps(replies, ensure_ascii=False)
    leaked = [w for w in later_titles + [c.name for c in later] if named(w, text)]
    assert not leaked, leaked
    assert "Into the Primitive" in text  # chapter 1 is listed
    assert "1 more part past your spoiler limit (titles hidden)" in text
    assert "Nobody of that name is met up to this chapter" in text
    # the right end of the slider (no limit) lists every chapter again
    _, chapters = client.predict([WILD], 2, api_name="/select_books")
    assert all(t in chapters for t in later_titles) and "past your spoiler limit" not in chapters


def test_bad_input_is_one_clear_line(app):
    client = Client(app.url, verbose=False)
    _, history, _, line, _ = chat(client, "   ", [WILD])
    assert line == "⚠ Type a question first." and history == []
    _, history, _, line, _ = chat(client, FATHER, [])
    assert "Choose a book" in line and history == []
    with pytest.raises(AppError, match=r"'pg999' .* is not in the list of choices"):
        chat(client, FATHER, ["pg999"])  # the library panel offers loaded books only
    with pytest.raises(UnknownBookError, match=r"pg215 \(The Call of the Wild\)"):
        app.service.ask(FATHER, ["pg999"])


def answer_api(client: Client, **fields) -> dict:
    """The last message of one ``/answer`` call, as ``litrag ask`` reads it."""
    args = {"question": FATHER, "books": [WILD], "upto_chapter": None, "use_llm": False}
    args.update({"retrieval": "", "top_k": 0, **fields})
    return json.loads(client.predict(**args, api_name="/answer"))


def test_the_answer_api_checks_its_input_as_the_cli_does(app):
    """Issue 34, bugs 5 and 7: each of these went through (or crashed) before."""
    client = Client(app.url, verbose=False)
    bad = {
        "question": ("x" * 100_000, "the question is 100,000 characters long"),
        "top_k": (-3, "top_k: Input should be greater than or equal to 1"),
        "books": ("pg215", "books: Input should be a valid list (got 'pg215')"),
        "upto_chapter": (10**12, "upto_chapter: Input should be less than or equal to"),
    }
    for field, (value, message) in bad.items():
        out = answer_api(client, **{field: value})
        assert message in out.get("input_error", ""), (field, out)
    out = answer_api(client, top_k="abc")
    assert "top_k: Input should be a valid integer (got 'abc')" in out["input_error"]
    out = answer_api(client, question=None)
    assert "question: Input should be a valid string (got None)" in out["input_error"]
    out = answer_api(client, upto_chapter=9)  # past the book's last chapter (2)
    assert out["input_error"] == "upto_chapter must be a chapter of the book (1-2), got 9"
    out = answer_api(client, upto_chapter=1, top_k=2)  # a good one still answers
    assert out["answer"]["upto_chapter"] == 1 and len(out["answer"]["sources"]) <= 2


def raw_call(url: str, api: str, data: str) -> str:
    """One API call with ``data`` as raw JSON text (``NaN`` and ``Infinity`` literals, which
    gradio_client refuses to send): the event stream's text."""
    import httpx

    base = url.rstrip("/")
    posted = httpx.post(
        f"{base}/gradio_api/call/{api}",
        content='{"data": ' + data + "}",
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    posted.raise_for_status()
    event = posted.json()["event_id"]
    return httpx.get(f"{base}/gradio_api/call/{api}/{event}", timeout=120).text


def test_a_nan_or_infinite_spoiler_limit_is_one_clear_error(app):
    """Issue 34, bug 6: NaN (raw JSON) crashed /chat, /characters, /profile and /select_books
    with "cannot convert float NaN to integer"."""
    question = json.dumps(FATHER)
    calls = {
        "chat": f'[{question}, [], ["{WILD}"], {{}}]',
        "characters": f'[["{WILD}"], {{}}]',
        "profile": f'[["{ALICE}"], {{}}, "{ALICE}:alice"]',  # a character chosen
        "select_books": f'[["{WILD}"], {{}}]',
    }
    for api, template in calls.items():
        out = raw_call(app.url, api, template.replace("{}", "NaN"))
        assert "event: error" in out and "cannot convert" not in out, (api, out)
        assert "the spoiler limit must be a finite chapter number, got nan" in out, (api, out)
        out = raw_call(app.url, api, template.replace("{}", "Infinity"))  # the slider's own check
        assert "event: error" in out and "is greater than maximum value" in out, (api, out)
    client = Client(app.url, verbose=False)
    _, history, _, line, _ = chat(client, "x" * 5000, [WILD])
    assert "The question is 5,000 characters" in line and history == []


# ----------------------------------------------------------------------------- uploads
def test_upload_a_book_then_ask_it(app, books_dir, tmp_path):
    book = short_book(books_dir / "pg84_frankenstein.txt", tmp_path / "pg84_short.txt", "Letter 3")
    client = Client(app.url, verbose=False)
    log, books, _ = client.predict([handle_file(str(book))], [WILD], api_name="/add_books")
    assert "added **pg84**" in log, log
    assert "pg84" in {r.book_id for r in app.service.books()}
    # the library panel lists it, selected beside the books already chosen
    assert books["value"] == [WILD, "pg84"]
    assert [c[1] for c in books["choices"]] == [ALICE, WILD, "pg84"]
    *_, answer = chat(client, "Who writes these letters to his sister?", ["pg84"])
    assert answer["sources"] and answer["sources"][0]["book_id"] == "pg84"
    assert len(list((app.home / "uploads").glob("*-pg84_short.txt"))) == 1
    log, _, _ = client.predict([handle_file(str(book))], [WILD], api_name="/add_books")
    assert "already in the library" in log


def test_an_upload_leaves_no_copy_in_the_temp_folder(app, books_dir, tmp_path):
    """Issue 33: Gradio kept every upload under the system temp folder after the library had
    stored its own copy; the hand-off now deletes Gradio's copy (and its folder)."""
    from gradio.utils import get_upload_folder

    name = "pg84_temp_copy_probe.txt"
    book = short_book(books_dir / "pg84_frankenstein.txt", tmp_path / name, "Letter 3")
    log, _, _ = Client(app.url, verbose=False).predict(
        [handle_file(str(book))], [WILD], api_name="/add_books"
    )
    assert "pg84" in log, log  # added, or already there from another test
    assert list((app.home / "uploads").glob(f"*-{name}")), "the library keeps its copy"
    assert not list(Path(get_upload_folder()).rglob(name)), "Gradio's copy is left behind"
    assert book.is_file()  # the user's own file is never touched


def test_upload_of_a_png_named_txt_is_refused(app, tmp_path):
    fake = tmp_path / "cover.txt"
    fake.write_bytes(png_bytes() * 20)
    before = Library.read_registry(app.home)
    log, books, _ = Client(app.url, verbose=False).predict(
        [handle_file(str(fake))], [WILD], api_name="/add_books"
    )
    assert "✗" in log and "cover.txt" in log and "binary" in log.lower(), log
    assert Library.read_registry(app.home) == before
    assert books["value"] == [WILD] and len(books["choices"]) == len(before)
    assert not list((app.home / "uploads").glob("*cover.txt"))


def test_two_uploads_named_alike_keep_both_books_and_a_refusal_touches_nothing_else(
    app, books_dir, tmp_path
):
    """Issue 34, bug 2: ``A/book.txt`` then ``B/book.txt`` (two books) left one source for both,
    and a refused empty ``book.txt`` then deleted it. Now each is stored under its own hash."""
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    (tmp_path / "C").mkdir()
    emma = short_book(books_dir / "pg158_emma.txt", tmp_path / "A" / "book.txt", "CHAPTER II")
    pride = books_dir / "pg1342_pride_and_prejudice.txt"
    pride = short_book(pride, tmp_path / "B" / "book.txt", "Chapter 2")
    client = Client(app.url, verbose=False)
    for book, book_id in ((emma, "pg158"), (pride, "pg1342")):
        log, _, _ = client.predict([handle_file(str(book))], [WILD], api_name="/add_books")
        assert f"added **{book_id}**" in log, log
    records = {r.book_id: r for r in Library.read_registry(app.home)}
    sources = {Path(records[b].source) for b in ("pg158", "pg1342")}
    assert len(sources) == 2 and all(p.parent == app.home / "uploads" for p in sources)
    texts = {p.read_bytes() for p in sources}
    assert texts == {emma.read_bytes(), pride.read_bytes()}  # each its own text
    before = {p: p.read_bytes() for p in (app.home / "uploads").iterdir()}
    empty = tmp_path / "C" / "book.txt"
    empty.write_text("   \n")  # refused: only whitespace
    log, _, _ = client.predict([handle_file(str(empty))], [WILD], api_name="/add_books")
    assert "✗" in log and "book.txt" in log and "empty" in log, log
    assert str(app.home) not in log and "/tmp" not in log and "uploads" not in log, log
    after = {p: p.read_bytes() for p in (app.home / "uploads").iterdir()}
    assert after == before  # the other books' sources stand; the refused copy is gone
    assert {r.book_id: r for r in Library.read_registry(app.home)} == records
    for book_id in ("pg158", "pg1342"):
        *_, answer = chat(client, "Who is the story about?", [book_id], upto=1)
        assert answer["sources"] and answer["sources"][0]["book_id"] == book_id


# ----------------------------------------------------------------------------- sessions
def test_ten_concurrent_chats_do_not_cross_talk(app):
    """Ten sessions at once, two books, each a question and a follow-up: every session sees
    only its own turns, its own book and its own follow-up rewrite."""
    asks = {
        WILD: ("Who is Manuel?", "Why did he sell him?"),
        ALICE: ("What does Alice find in the little bottle?", "What happens when she drinks it?"),
    }
    results: dict[int, tuple] = {}
    errors: list[BaseException] = []

    def session(i: int) -> None:
        try:
            book = WILD if i % 2 else ALICE
            first, follow = asks[book]
            first = f"{first} ({i})"  # a mark of the session in its own history
            client = Client(app.url, verbose=False)
            _, history, _, _, a1 = chat(client, first, [book])
            _, history, _, line, a2 = chat(client, follow, [book], history=history)
            results[i] = (book, first, history, line, a1, a2)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert len(results) == 10
    for i, (book, first, history, line, a1, a2) in results.items():
        users = [text_of(m) for m in history if m["role"] == "user"]
        assert len(users) == 2 and first in users[0], (i, users)
        assert f"searched for: “{first} " in line, (i, line)
        assert a1["question"] == first and a2["book_ids"] == [book]
        assert all(s["book_id"] == book for s in a1["sources"] + a2["sources"])


# ----------------------------------------------------------------------------- LLM failures
def test_unreachable_llm_shows_a_message_and_the_sources(app):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    llm = openai_like(dead, max_retries=0, timeout=5)
    with answering_with(app.service, llm, f"local at {dead}"):
        _, history, sources, line, answer = chat(Client(app.url, verbose=False), FATHER, [WILD])
    assert answer["error"].startswith(f"cannot reach the LLM server at {dead}")
    # the bubble holds Markdown source: the URL is escaped there, so it is not made a link
    assert render_text(f"cannot reach the LLM server at {dead}") in text_of(history[1])
    assert "passages it was given are listed under Sources" in text_of(history[1])
    assert line.startswith("⚠ cannot reach the LLM server")
    assert len(answer["sources"]) == 5 and "[5] The Call of the Wild" in sources


def test_llm_timing_out_mid_stream_keeps_the_partial_answer(app, stalling_url):
    llm = openai_like(stalling_url, max_retries=0, timeout=1.5)
    with answering_with(app.service, llm, "stall"):
        _, history, sources, _, answer = chat(Client(app.url, verbose=False), FATHER, [WILD])
    shown = text_of(history[1])
    assert shown.startswith("Buck's father was\n\n⚠ the LLM")
    assert "timed out mid-answer" in shown and answer["text"] == "Buck's father was"
    assert len(answer["sources"]) == 5 and "[1] The Call of the Wild" in sources


@pytest.mark.llm
def test_streams_a_cited_answer_from_the_local_llm(app, llama_server):
    """The real llama.cpp server (SmolLM2: plumbing, not quality): the answer arrives in
    several pieces, the sources are real blocks of the book, the line names the LLM."""
    llm = llama_server.llm(max_tokens=48, timeout=600)
    with answering_with(app.service, llm, "SmolLM2 (test llama.cpp)"):
        client = Client(app.url, verbose=False)
        job = client.submit(FATHER, [], [WILD], 3, api_name="/chat")
        updates = list(job)
        _, history, sources, line, answer = job.outputs()[-1]
        follow = chat(client, "Who was his mother?", [WILD], history=history)
    texts = {text_of(u[1][1]) for u in updates if len(u[1]) > 1}
    assert len(texts) > 2  # streamed: several distinct partial answers
    assert answer["mode"] == "llm" and answer["error"] is None and answer["text"]
    assert "LLM: SmolLM2 (test llama.cpp)" in line
    real = {n.node_id for n in app.service.store.get_nodes() if n.metadata["book_id"] == WILD}
    assert len(answer["sources"]) == 5 and {s["node_id"] for s in answer["sources"]} <= real
    assert "[1] The Call of the Wild" in sources
    # whole blocks are read (no excerpt), and the line says so by naming no excerpts
    assert all(s["excerpt"] is None for s in answer["sources"])
    assert "excerpts" not in answer["retrieval"]
    assert follow[4]["question"] == "Who was his mother?" and follow[4]["sources"]


@pytest.mark.llm
def test_streams_a_cited_answer_through_the_vllm_backend(app, keyed_server):
    """The chat answering through llama-index-llms-vllm (``LITRAG_LLM_BACKEND=vllm``; SmolLM2 on
    llama.cpp, plumbing): the answer streams, the line names the client, the prompt went out as
    a chat with the model, limit and key."""
    s = Settings(
        home=app.home,
        llm_backend="vllm",
        llm_url=keyed_server.api_base,
        llm_model="local",
        llm_api_key=API_KEY,
    )
    answer_llm = build_answer_llm(s, max_tokens=48)
    n = len(keyed_server.chats())
    with answering_with(app.service, answer_llm.llm, answer_llm.description):
        client = Client(app.url, verbose=False)
        job = client.submit(FATHER, [], [WILD], 3, api_name="/chat")
        updates = list(job)
        _, _history, sources, line, answer = job.outputs()[-1]
    texts = {text_of(u[1][1]) for u in updates if len(u[1]) > 1}
    assert len(texts) > 2  # streamed: several distinct partial answers
    assert answer["mode"] == "llm" and answer["error"] is None and answer["text"]
    assert f"LLM: local at {keyed_server.api_base} (llama-index-llms-vllm VllmServer)" in line
    assert len(answer["sources"]) == 5 and "[1] The Call of the Wild" in sources
    (sent,) = keyed_server.chats()[n:]
    body = sent["body"]
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert FATHER in body["messages"][1]["content"]
    assert (body["model"], body["max_tokens"], body["stream"]) == ("local", 48, True)
    assert sent["headers"]["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.llm
def test_local_llm_killed_mid_answer_is_reported_in_the_chat(app, tmp_path):
    """The llama.cpp child dies by SIGILL while the UI streams: the chat shows the partial
    answer and one line naming the crash and the way out; the sources stay; the next question
    is told the same, not a bare connection error."""
    import signal

    from litrag.models.llama_server import LlamaServer, smollm2_path

    server = LlamaServer(smollm2_path(), n_ctx=4096, log_path=tmp_path / "s.log").start()
    before = app.service.answer_llm
    app.service.answer_llm = AnswerLLM(
        server.llm(max_tokens=256, timeout=600), "SmolLM2 (test llama.cpp)", server
    )
    try:
        assert server._proc is not None
        pid = server._proc.pid
        client = Client(app.url, verbose=False)
        job = client.submit(
            "Tell me everything that happens to Buck in the story, in great detail.",
            [],
            [WILD],
            3,
            api_name="/chat",
        )
        for update in job:
            if update[3] == "Answering …" and text_of(update[1][1]).strip():  # a token shown
                os.kill(pid, signal.SIGSTOP)  # frozen mid-answer, then killed as a fault would
                os.kill(pid, signal.SIGILL)
                os.kill(pid, signal.SIGCONT)
                break
        _, history, sources, line, answer = job.result()
        again = chat(client, FATHER, [WILD])[4]
    finally:
        app.service.answer_llm = before
        server.stop()
    crash = f"the local LLM (llama.cpp, pid {pid}) crashed: killed by SIGILL (illegal instruction"
    assert answer["error"].startswith(crash) and answer["text"]
    assert answer["error"].endswith("(the text above is partial)")
    shown = text_of(history[1])
    assert shown.startswith(answer["text"]) and f"⚠ {crash}" in shown
    assert render_text("bash scripts/install_llama_cpp.sh") in shown and "--no-llm" in shown
    assert line.startswith(f"⚠ {crash}")
    # The UI routes this question to a narrative tool (the book has a character index): its
    # sources are the blocks behind the tool's notes, as many as fit; a plain answer has top 5.
    routed = (answer.get("route") or {}).get("tool", "search_passages") != "search_passages"
    assert answer["sources"] and (routed or len(answer["sources"]) == 5)
    assert "[1] The Call of the Wild" in sources
    assert again["error"].startswith(crash) and again["sources"]


# ----------------------------------------------------------------------------- other commands
def litrag(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_LLM")}
    env["LITRAG_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "litrag.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_works_while_the_ui_holds_the_library(app, tmp_path):
    ui = running_ui(app.home)
    assert ui is not None and ui.pid == os.getpid() and ui.url == app.url
    r = litrag(app.home, "books")
    assert r.returncode == 0 and "pg215" in r.stdout
    r = litrag(app.home, "ask", FATHER, "--book", WILD, "--no-llm", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["mode"] == "extractive" and "St. Bernard" in answer["text"]
    assert answer["sources"][0]["book_id"] == WILD
    r = litrag(app.home, "ask", FATHER, "--book", WILD, "--no-llm", "--upto-chapter", "1")
    assert r.returncode == 0, r.stderr
    assert "asking through the litrag chat UI (pid" in r.stderr
    assert "St. Bernard" in r.stdout and "Sources (" in r.stdout and "up to chapter 1" in r.stdout
    r = litrag(app.home, "ask", FATHER, "--book", "pg999")  # checked before the store: local
    assert r.returncode == 2 and "no book 'pg999'" in r.stderr
    book = tmp_path / "x.txt"
    book.write_text("It was a dark night. " * 50, encoding="utf-8")
    for args in (("ingest", str(book)), ("remove", ALICE)):
        r = litrag(app.home, *args)
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode == 2
        assert last.startswith(f"error: the library {app.home} is held by the litrag chat UI")
        assert f"pid {os.getpid()}" in last and "upload panel" in last
        assert sum(line.startswith("error:") for line in r.stderr.splitlines()) == 1
    assert ALICE in {r.book_id for r in app.service.books()}


def test_first_start_ingests_the_bundled_book_and_cleans_up(
    books_dir, tmp_path, monkeypatch, capsys
):
    """`litrag chat` on an empty library: the bundled book (here its first chapter, for time)
    is ingested offline with a progress bar, the UI serves it, ``ui.json`` names the UI and is
    gone after it."""
    from litrag.app import serve

    short = short_book(
        books_dir / "pg215_call_of_the_wild.txt", tmp_path / "wild.txt", "Chapter II."
    )
    monkeypatch.setattr(serve, "BUNDLED_BOOK", short)
    home = tmp_path / "home"
    stop, ready, status = threading.Event(), threading.Event(), {}
    urls: list[str] = []

    def run() -> None:
        status["rc"] = serve.run_chat(
            Settings(home=home),
            port=free_port(),
            no_llm=True,
            ready=lambda url: (urls.append(url), ready.set()),
            stop=stop,
        )

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert ready.wait(600), "the UI did not come up"
        assert [r.book_id for r in Library.read_registry(home)] == [WILD]
        ui = running_ui(home)
        assert ui is not None and ui.url == urls[0] and ui.pid == os.getpid()
        *_, line, answer = chat(Client(urls[0], verbose=False), FATHER, [WILD], upto=1)
        assert "St. Bernard" in answer["text"] and "no LLM: --no-llm" in line
    finally:
        stop.set()
        thread.join(120)
    assert status["rc"] == 0 and not (home / "ui.json").exists()
    err = capsys.readouterr().err
    assert f"{WILD}: 100%" in err and "1/1" in err  # the wait for the first ingest is visible
