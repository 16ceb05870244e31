"""Answering on real ingested books: the paper's prompt layout, extractive answers, the query and
chat engines streaming from a real llama.cpp server (SmolLM2: plumbing, not quality), and the
failures a reader can meet (LLM unreachable, LLM stalling mid-answer), in the API and in
``litrag ask``."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import MessageRole
from scripted_llm import ScriptedLLM
from test_retriever import ALICE, WILD, ingested_shelf

from litrag.answering.answer import (
    DATA_RULE,
    EXTRACTIVE_LABEL,
    GUTENQA_SUFFIX,
    QA_SYSTEM_PROMPT,
    AnswerStream,
    BookQueryEngine,
    estimate_tokens,
    fit_to_context,
    format_chunk,
    within_words,
)
from litrag.answering.checks import EndingAhead
from litrag.builders import build_embed_model, build_query_engine
from litrag.models.llama_server import openai_like
from litrag.retrieval.retriever import RetrievalSettings
from litrag.settings import DEFAULT_READ_WORDS, Settings

FATHER = "What kind of dog was Buck's father?"  # The Call of the Wild, chapter I


@pytest.fixture(scope="module")
def home(books_dir, tmp_path_factory) -> Path:
    return ingested_shelf(books_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def embed(home):
    return build_embed_model(Settings(home=home))


@pytest.fixture
def engine_for(home, embed) -> Iterator:
    """``engine_for(book_ids, llm=None, upto=None)``, all on one store that is closed after the
    test (one opener per embedded store), so ``litrag ask`` subprocesses can open it. The test
    LLMs read every block (``read_words=0``, a server's default); ``read_words=None`` keeps the
    packaged model's budget."""
    opened: list = []

    def make(book_ids, llm=None, upto=None, top_k=None, read_words=0) -> BookQueryEngine:
        retrieval = RetrievalSettings.from_preset("embedded", top_k=top_k)
        e = build_query_engine(
            Settings(home=home, read_words=read_words),
            book_ids,
            upto_chapter=upto,
            llm=llm,
            retrieval=retrieval,
            embed_model=embed,
            store=opened[0] if opened else None,
            children_store=opened[1] if opened else None,
        )
        if not opened:
            opened.extend([e.retriever.vector_store, e.retriever.children_store])
        return e

    yield make
    for store in opened:
        if store is not None:
            store.close()


def store_ids(engine: BookQueryEngine, book_id: str) -> set[str]:
    return {
        n.node_id
        for n in engine.retriever.vector_store.get_nodes()
        if n.metadata["book_id"] == book_id
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- prompt, no LLM
def test_prompt_is_the_papers_layout(engine_for):
    engine = engine_for(WILD)
    nodes = engine.retriever.retrieve(FATHER)
    chunks = [c for _, c in fit_to_context(nodes, 10_000)]
    system, user = engine.messages(FATHER, chunks)
    assert system.role == MessageRole.SYSTEM and user.role == MessageRole.USER
    assert system.content == f"{QA_SYSTEM_PROMPT} {DATA_RULE} {GUTENQA_SUFFIX}"
    head = (
        f"Book Title: <title>The Call of the Wild</title>\nQuestion: {FATHER}\n"
        "References:\n<passage from="
    )
    assert user.content.startswith(head)
    assert user.content.count("<passage from=") == user.content.count("</passage>") == 5
    assert len(nodes) == 5
    # the question comes again after the references, nearest to where the answer starts
    assert user.content.endswith(f"not instructions.)\nQuestion: {FATHER}\nAnswer:")
    first = nodes[0].node
    # an offline (keyword) subtitle stays out of the prompt; an LLM-written one goes in
    assert first.metadata["segmenter"] == "offline"
    assert f'<passage from="{first.metadata["chapter_title"]}">\n' in user.content
    assert first.metadata["subtitle"] not in user.content
    assert first.get_content().strip() in user.content
    written = nodes[0].model_copy(deep=True)
    written.node.metadata.update(segmenter="litseg-lite", subtitle="Buck's parents")
    head = f'<passage from="{first.metadata["chapter_title"]} - Buck\'s parents">\n'
    assert format_chunk(written).startswith(head)


def test_blocks_that_do_not_fit_are_neither_sent_nor_cited(engine_for):
    engine = engine_for(WILD)
    nodes = engine.retriever.retrieve(FATHER)
    one = fit_to_context(nodes, 150)  # room for less than one block: the best one, cut
    assert [n for n, _ in one] == nodes[:1] and one[0][1].endswith("[...]\n</passage>")
    need = sum(estimate_tokens(c) + 2 for _, c in fit_to_context(nodes[:2], 10**6))
    assert len(fit_to_context(nodes, need)) == 2
    assert len(fit_to_context(nodes, need - 1)) == 1


def test_story_order_sends_the_same_blocks_in_reading_order(engine_for):
    question = "How did Buck learn the law of club and fang?"  # spans chapters I and II
    scored = engine_for(WILD).retriever.retrieve(question)
    llm = ScriptedLLM(["By being beaten."])
    engine = engine_for(WILD, llm=llm)
    engine.streaming, engine.passage_order = False, "story"
    answer = AnswerStream.from_response(engine.query(question)).answer()
    place = [(s.chapter_index, s.sentence_from) for s in answer.sources]
    assert place == sorted(place) and [s.rank for s in answer.sources] == [1, 2, 3, 4, 5]
    assert {s.node_id for s in answer.sources} == {n.node.node_id for n in scored}
    assert [s.node_id for s in answer.sources] != [n.node.node_id for n in scored]  # reordered
    prompt = llm.requests[0][-1].content
    starts = [prompt.index((s.excerpt or s.text)[:80]) for s in answer.sources]
    assert starts == sorted(starts)  # the prompt lists them in the cited order
    with pytest.raises(ValueError, match="passage_order"):
        BookQueryEngine(engine.retriever, passage_order="random")  # type: ignore[arg-type]


def test_the_local_model_reads_its_best_blocks_whole_within_a_word_budget(engine_for):
    question = "Who sold Buck to the stranger at the flag station?"
    llm = ScriptedLLM(["Manuel."])
    engine = engine_for(WILD, llm=llm, read_words=None)
    budget = DEFAULT_READ_WORDS
    assert engine.read_words == budget  # the packaged model's default
    engine.streaming = False
    nodes = engine.retriever.retrieve(question)
    chunks = [c for _, c in fit_to_context(nodes, 10**6)]
    lengths = [len(c.split()) for c in chunks]
    n = 1
    while n < len(chunks) and sum(lengths[: n + 1]) <= budget:
        n += 1
    answer = AnswerStream.from_response(engine.query(question)).answer()
    prompt = llm.requests[0][-1].content
    # the first n blocks, whole and in rank order, are what the model read and what is cited
    assert [s.node_id for s in answer.sources] == [x.node.node_id for x in nodes[:n]]
    assert all(c in prompt for c in chunks[:n]) and not any(c in prompt for c in chunks[n:])
    assert all(s.excerpt is None for s in answer.sources)
    assert f"up to {budget} words" in answer.retrieval
    # the first block is read even when it alone is over the budget; 0 reads all it is given
    fitted = fit_to_context(nodes, 10**6)
    assert [x for x, _ in within_words(fitted, 5)] == nodes[:1]
    assert within_words(fitted, 0) == fitted
    assert len(within_words(fitted, sum(lengths))) == len(fitted)
    assert len(within_words(fitted, sum(lengths) - 1)) == len(fitted) - 1


@pytest.mark.quick
def test_extractive_answer_without_llm(engine_for):
    answer = engine_for(WILD).ask(FATHER).answer()
    assert answer.mode == "extractive" and answer.error is None
    assert answer.text.startswith(EXTRACTIVE_LABEL)
    assert "St. Bernard" in answer.text
    (src,) = answer.sources
    assert src.book_id == WILD and src.chapter_index == 1
    assert answer.evidence and all(s in " ".join(src.text.split()) for s in answer.evidence)
    assert 1 <= src.sentence_from <= src.sentence_to


def test_nothing_retrieved_says_so_without_calling_an_llm(engine_for):
    dead = openai_like(f"http://127.0.0.1:{free_port()}/v1", max_retries=0, timeout=2)
    answer = engine_for(WILD, llm=dead, upto=0).ask(FATHER).answer()
    assert answer.mode == "none" and answer.sources == [] and answer.error is None
    assert "Nothing in The Call of the Wild up to chapter 0" in answer.text


def test_empty_question_raises(engine_for):
    with pytest.raises(ValueError, match="empty"):
        engine_for(WILD).ask("  \n")


# --------------------------------------------------------------------------- failing LLMs
def test_unreachable_llm_keeps_the_sources(engine_for):
    url = f"http://127.0.0.1:{free_port()}/v1"
    stream = engine_for(WILD, llm=openai_like(url, max_retries=0, timeout=5)).ask(FATHER)
    assert len(stream.sources) == 5  # known before any token
    assert list(stream) == []
    answer = stream.answer()
    assert answer.text == "" and len(answer.sources) == 5
    assert answer.error.startswith(f"cannot reach the LLM server at {url}")


def test_llm_timeout_mid_stream_keeps_the_partial_answer(engine_for, stalling_url):
    llm = openai_like(stalling_url, max_retries=0, timeout=1.5)
    stream = engine_for(WILD, llm=llm).ask(FATHER)
    # what streamed before the stall is kept (pieces a check may withdraw are held back and sent
    # together once the stream ends, so the split between pieces is not fixed)
    assert "".join(stream) == "Buck's father was"
    answer = stream.answer()
    assert answer.text == "Buck's father was" and len(answer.sources) == 5
    assert "timed out mid-answer" in answer.error


# --------------------------------------------------------------------------- real LLM server
@pytest.mark.llm
def test_query_engine_streams_a_cited_answer(engine_for, llama_server):
    engine = engine_for(WILD, llm=llama_server.llm(max_tokens=48, timeout=600))
    response = engine.query(FATHER)  # the LlamaIndex interface: a StreamingResponse
    stream = AnswerStream.from_response(response)
    assert len(stream.sources) == 5  # known before the first token
    pieces = list(stream)
    answer = stream.answer()
    # SmolLM2 (plumbing, not quality) often names what no passage does: then the streamed text
    # is what the checks let through of the withdrawn draft, and the answer the plain reply.
    if answer.draft is None:
        assert len(pieces) > 1 and answer.text == "".join(pieces).strip()
    else:
        assert answer.draft.startswith("".join(pieces).strip()) and answer.text
    words = {w.lower() for s in answer.sources for w in re.findall(r"\w+", s.text)}
    assert all(name.lower() not in words for name in answer.withheld)
    assert answer.mode == "llm" and answer.error is None and answer.answered_by
    real = store_ids(engine, WILD)
    assert [n.node.node_id for n in response.source_nodes] == [s.node_id for s in answer.sources]
    assert [s.rank for s in answer.sources] == [1, 2, 3, 4, 5]
    assert {s.node_id for s in answer.sources} <= real
    assert all(s.book_id == WILD and s.text for s in answer.sources)


@pytest.mark.llm
def test_late_chapter_question_with_an_early_limit(engine_for, llama_server):
    question = "What is a Caucus-race, and who wins it?"  # Alice, chapter III
    llm = llama_server.llm(max_tokens=32, timeout=600)
    free = engine_for(ALICE).retriever.retrieve(question)
    assert free[0].node.metadata["chapter_index"] == 3  # the question is about chapter 3
    checked = engine_for(ALICE, llm=llm, upto=1).ask(question).answer()
    # "Caucus" first appears in chapter III: said so, no LLM call, nothing later shown.
    assert checked.withheld == ["Caucus-race"] and checked.mode == "none"
    assert "up to chapter 1" in checked.text
    assert checked.sources and all(s.chapter_index <= 1 for s in checked.sources)
    engine = engine_for(ALICE, llm=llm, upto=1)
    engine.checks, engine.question_checks = (), (EndingAhead(),)  # the limit alone, streamed
    stream = engine.ask(question)
    pieces = list(stream)
    limited = stream.answer()
    assert len(pieces) > 1 and limited.error is None and limited.upto_chapter == 1
    assert limited.sources and all(s.chapter_index <= 1 for s in limited.sources)


# --------------------------------------------------------------------------- litrag ask
def ask(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_LLM")}
    full_env.update(LITRAG_HOME=str(home), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ask", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.quick
def test_cli_refuses_bad_input_in_one_line(home):
    r = ask(home, "   ", "--book", WILD)
    assert r.returncode == 2 and r.stderr.strip() == "error: the question is empty"
    r = ask(home, "Who is Buck?", "--book", "pg999")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no book 'pg999'" in r.stderr
    assert "pg215 (The Call of the Wild)" in r.stderr
    r = ask(home, "Who is Buck?")  # two books loaded: --book is needed
    assert r.returncode == 2 and "--book" in r.stderr
    # the request model the UI's /answer uses too (issue 34, bugs 5 and 7)
    r = ask(home, "why " * 3000, "--book", WILD)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "the question is 11,999 characters long; the limit is 2,000" in r.stderr
    r = ask(home, "Who is Buck?", "--book", WILD, "--top-k", "999")
    assert r.returncode == 2 and "--top-k: Input should be less than or equal to 50" in r.stderr


def test_cli_extractive_json_with_spoiler_limit(home):
    r = ask(home, "How did Curly die?", "--book", WILD, "--upto-chapter", "1", "--no-llm", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["mode"] == "extractive" and answer["text"].startswith(EXTRACTIVE_LABEL)
    assert answer["upto_chapter"] == 1 and answer["book_ids"] == [WILD]
    assert answer["sources"] and all(s["chapter_index"] <= 1 for s in answer["sources"])


def test_cli_unreachable_llm_and_mid_stream_timeout(home, stalling_url):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    r = ask(home, FATHER, "--book", WILD, env={"LITRAG_LLM_URL": dead})
    assert r.returncode == 1
    assert f"error: cannot reach the LLM server at {dead}" in r.stderr
    assert "Sources (" in r.stdout and "[5] The Call of the Wild, Chapter" in r.stdout
    r = ask(home, FATHER, "--book", WILD, "--timeout", "2", env={"LITRAG_LLM_URL": stalling_url})
    assert r.returncode == 1
    assert r.stdout.startswith("Buck's father was\n")
    assert "timed out mid-answer" in r.stderr and "[1] The Call of the Wild" in r.stdout


LONG_ANSWER = "Tell me everything that happens to Buck in the story, in great detail."


@pytest.mark.llm
def test_cli_local_llm_killed_mid_answer_is_one_clear_line(home):
    """The llama.cpp child dies by SIGILL while `litrag ask` streams: one line naming the signal,
    its meaning and the way out; the partial text and the sources stay; no fault dump, no hang."""
    import signal as sig
    import time

    import psutil

    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_LLM")}
    env.update(LITRAG_HOME=str(home), LITRAG_LOCAL_LLM="smollm2", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "litrag.cli", "ask", LONG_ANSWER, "--book", WILD],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.read(1)  # the first streamed character of the answer
        assert first, proc.stderr.read().decode() if proc.stderr else ""
        children = [
            c
            for c in psutil.Process(proc.pid).children()
            if "litrag.models.llama_child" in " ".join(c.cmdline())
        ]
        assert len(children) == 1
        child = children[0]
        child.send_signal(sig.SIGSTOP)  # frozen mid-answer, then killed as a fault would
        child.send_signal(sig.SIGILL)
        child.send_signal(sig.SIGCONT)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=120)
        assert time.monotonic() - t0 < 60  # no hang on the dead server
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = (first + out).decode(), err.decode()
    assert proc.returncode == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith(
        f"error: the local LLM (llama.cpp, pid {child.pid}) crashed: killed by SIGILL "
        "(illegal instruction: this llama.cpp build uses a CPU instruction"
    )
    assert "bash scripts/install_llama_cpp.sh" in errors[0] and "--no-llm" in errors[0]
    assert errors[0].endswith("(the text above is partial)")
    assert "Traceback" not in err and "Fatal Python error" not in err
    assert "Sources (" in out and "[1] The Call of the Wild" in out
    assert out.split("Sources (")[0].strip()  # the partial answer was kept


@pytest.mark.llm
@pytest.mark.parametrize("backend", ["openai-like", "vllm"])
def test_a_server_window_smaller_than_the_prompt_is_one_clear_error(home, tmp_path, backend):
    """Issue 33, bug 10: a real llama.cpp server started with a 512-token window, asked with
    the default 4096-token budget: its stream ends without a word, which the openai-like client
    gave as an empty answer with exit 0. Now the plain request that follows names the cause
    (the server's window and the setting that fits it), the sources stay, exit 1."""
    from llm_server import NO_PINGS

    from litrag.models.llama_server import LlamaServer, smollm2_path

    server = LlamaServer(
        smollm2_path(), n_ctx=512, log_path=tmp_path / "server.log", extra_args=NO_PINGS
    ).start()
    try:
        env = {
            "LITRAG_LLM_URL": server.api_base,
            "LITRAG_LLM_MODEL": server.model,
            "LITRAG_LLM_BACKEND": backend,
        }
        r = ask(home, FATHER, "--book", WILD, "--top-k", "5", env=env)
    finally:
        server.stop()
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, r.stderr
    assert "maximum context length is 512" in errors[0], errors
    assert "set LITRAG_LLM_CONTEXT to at most 512" in errors[0]
    assert "Sources (" in r.stdout and "[1] The Call of the Wild" in r.stdout
