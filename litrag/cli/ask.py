"""Asking: ``litrag ask`` (a streamed, cited answer) and ``litrag chat`` (the Gradio UI).

While ``litrag chat`` holds the embedded store, ``litrag ask`` hands its question to that UI.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from litrag.cli.common import add_backend_flag, add_serving_flags, settings_from_args
from litrag.retrieval.evidence import from_evidence
from litrag.segment.controls import strip_controls
from litrag.settings import SettingsError

# The request fields as `litrag ask` spells them, for its error lines.
CLI_NAMES = {
    "question": "the question",
    "books": "--book",
    "upto_chapter": "--upto-chapter",
    "top_k": "--top-k",
    "retrieval": "--retrieval",
}


def _close_store(engine: Any) -> None:
    for store in (engine.retriever.vector_store, getattr(engine.retriever, "children_store", None)):
        if hasattr(store, "close"):
            store.close()
    if hasattr(engine, "close"):  # a routed engine's asset store
        engine.close()


def _cmd_ask(args: argparse.Namespace) -> int:
    """`litrag ask`: a streamed, cited answer; failures are one line and keep the sources."""
    from litrag.builders import build_answer_llm, build_query_engine, build_routed_engine
    from litrag.ingestion.integrity import LibraryDamagedError, check_files
    from litrag.ingestion.library import Library
    from litrag.models.llama_server import LocalModelError
    from litrag.models.served import BackendError
    from litrag.retrieval.retriever import RetrievalSettings, UnknownBookError
    from litrag.settings import llm_backend
    from litrag.stores.edge_store import StoreLockedError

    def fail(msg: str, code: int = 2) -> int:
        print(f"error: {msg}", file=sys.stderr)
        return code

    from litrag.answering.ask_request import AskRequest, AskRequestError

    question = " ".join(args.question.split())
    if not question:
        return fail("the question is empty")
    # SIGTERM runs the `finally` below too: the local LLM server must not outlive us.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    s = settings_from_args(args)  # --timeout, --top-k, --retrieval over the environment
    records = Library.read_registry(s.home)
    problems = check_files(s.home, s.collection, records, embedded=not s.qdrant_url)
    if problems:
        raise LibraryDamagedError(problems)
    books = args.book or [r.book_id for r in records][:2]
    if len(books) != 1 and not args.book:  # no --book: fine only when one book is loaded
        return fail(
            "choose a book with --book ID (see: litrag books)"
            if books
            else f"no books in {s.home}; add one with: litrag ingest BOOK.txt"
        )
    try:  # the checks the UI's /answer API makes too: one request model
        request = AskRequest.parse(
            CLI_NAMES,
            question=question,
            books=books,
            upto_chapter=args.upto_chapter,
            top_k=args.top_k,
            use_llm=not args.no_llm,
            retrieval=args.retrieval,
        )
        most = max((r.chapters for r in records if r.book_id in books), default=None)
        request.check_chapters(most, "--upto-chapter", first=1)
    except AskRequestError as exc:
        return fail(str(exc))
    question = request.question
    if line := _being_ingested(s, records, books):
        return fail(line)
    answer_llm = None
    if not args.no_llm and llm_backend(s) != "local":
        try:  # a server's client: nothing to start, so a setup mistake is said before any work
            answer_llm = build_answer_llm(s)
        except (BackendError, ImportError) as exc:
            return fail(str(exc).splitlines()[0])
    try:
        retrieval = RetrievalSettings.from_settings(s)
        if s.top_k is not None:
            retrieval.top_k = s.top_k
        build = build_query_engine if args.no_route else build_routed_engine
        engine = build(s, books, upto_chapter=args.upto_chapter, retrieval=retrieval)
    except StoreLockedError as exc:  # a running chat UI holds the library: ask through it
        return _ask_through_ui(args, s, books, question, exc)
    except (UnknownBookError, ValueError) as exc:
        return fail(str(exc))
    llm_error = None
    try:
        if not args.no_llm and answer_llm is None:
            if not args.json:
                print(f"starting the local LLM ({s.local_llm}) ...", file=sys.stderr)
            try:
                answer_llm = build_answer_llm(s)
            except LocalModelError as exc:  # keep going: the retrieval results are still shown
                llm_error = f"the local LLM did not start: {str(exc).splitlines()[0]}"
        if answer_llm is not None:
            engine.llm, engine.answered_by = answer_llm.llm, answer_llm.description
            engine.llm_health = answer_llm.diagnose
        stream = engine.ask(question)
        _close_store(engine)  # the sources are in hand: free the library for other processes
        if not args.json:
            for piece in stream:  # a model may echo a book's escape sequences: never raw
                print(strip_controls(piece), end="", flush=True)
            print()
        answer = stream.answer()
        if llm_error:  # the answer above is extractive (labelled so); say why
            answer = answer.model_copy(update={"error": llm_error})
    finally:
        if answer_llm is not None:
            answer_llm.close()
        _close_store(engine)
    return _print_answer(args, answer)


def _print_answer(args: argparse.Namespace, answer: Any) -> int:
    """The end of `litrag ask`: JSON, or the error line and the sources (the text streamed).

    Book text is printed without control characters (``strip_controls``): a store filled before
    the loader stripped them may still hold an OSC or ESC sequence, which a terminal would run.
    """
    if args.json:
        print(_json_text(answer.model_dump()))
    else:
        if answer.error:
            print(f"error: {strip_controls(answer.error)}", file=sys.stderr)
        if answer.route:
            print(f"route: {_route_line(answer.route)}", file=sys.stderr)
        if answer.draft is not None:  # the streamed draft named someone no source names
            print(f"\nWithdrawn. {strip_controls(answer.text)}")
        limit = f", up to chapter {args.upto_chapter}" if args.upto_chapter is not None else ""
        print(f"\nSources ({answer.retrieval}{limit}; answered by {answer.answered_by}):")
        for src in answer.sources:
            from litrag.app.display import shown_subtitle

            shown = src.model_copy(update={"subtitle": shown_subtitle(src)})
            print(strip_controls(shown.citation()))
            evidence = None if args.full else src.evidence  # --full: the whole passage
            text, moved = from_evidence(strip_controls(src.text), evidence, 400)
            if moved:  # open on the paragraph that ranked it
                text = "... " + text
            if not args.full and len(text) > 400:
                text = text[:400].rsplit(" ", 1)[0] + " ..."
            print(f"    {text}")
        if not answer.sources:
            print("(none)")
    return 1 if answer.error else 0


# JSON escapes C0 controls itself; DEL and the C1 range (a C1 CSI starts an escape) it leaves.
_C1 = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def _json_text(data: Any) -> str:
    """``data`` as indented JSON (non-ASCII text as is) holding no raw control character."""
    return json.dumps(data, indent=2, ensure_ascii=False).translate(_C1)


def _route_line(route: dict[str, Any]) -> str:
    """``character_profile(name='Buck') [rules: who a character is]``"""
    args = ", ".join(f"{k}={v!r}" for k, v in (route.get("kwargs") or {}).items() if v is not None)
    return f"{route.get('tool')}({args}) [{route.get('by')}: {route.get('reason')}]"


def _being_ingested(s: Any, records: list[Any], books: list[str]) -> str | None:
    """The line for a book whose ingest is running now (it is not half-done: its rerun would
    be wrong advice), else None."""
    from litrag.ingestion.registry import ingest_running

    partial = [r.book_id for r in records if r.book_id in books and r.status != "complete"]
    holder = ingest_running(s.home, s.collection) if partial and not s.qdrant_url else None
    if holder is None:
        return None
    return f"{partial[0]} is being ingested now (by {holder}): ask again when it finishes"


def _ask_through_ui(
    args: argparse.Namespace, s: Any, books: list[str], question: str, exc: Exception
) -> int:
    """`litrag ask` while `litrag chat` holds the store: the UI's /answer API answers."""
    from litrag.app.handoff import UIError, ask_via_ui, running_ui

    ui = running_ui(s.home)
    if ui is None:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.json:
        print(f"(asking through {ui.describe()})", file=sys.stderr)
    try:
        stream = ask_via_ui(
            ui,
            question,
            books,
            upto_chapter=args.upto_chapter,
            use_llm=not args.no_llm,
            retrieval=args.retrieval,
            top_k=args.top_k,
            api_key=s.api_key,
        )
        for piece in stream:
            if not args.json:
                print(strip_controls(piece), end="", flush=True)
        if not args.json:
            print()
        answer = stream.answer()
    except UIError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return _print_answer(args, answer)


def _cmd_chat(args: argparse.Namespace) -> int:
    """`litrag chat`: the Gradio UI (an empty library first gets the bundled book)."""
    from litrag.app.serve import run_chat

    s = settings_from_args(args)
    if not 1 <= args.port <= 65535:  # checked before the bundled book is ingested
        raise SettingsError(f"--port must be between 1 and 65535, got {args.port}")
    paths = list(args.paths or [])
    for given in [*paths, *([args.book_dir] if args.book_dir else [])]:
        if not Path(given).exists():
            raise SettingsError(f"{given}: no such file or folder")
    if args.book_dir:
        if not Path(args.book_dir).is_dir():
            raise SettingsError(f"--book-dir {args.book_dir} is not a folder")
        paths.append(args.book_dir)
    return run_chat(
        s,
        host=args.host,
        port=args.port,
        paths=paths,
        no_llm=args.no_llm,
        share=args.share,
    )


def add_parsers(sub: Any) -> None:
    """The ``ask`` and ``chat`` commands and their flags."""
    ask = sub.add_parser("ask", help="answer a question about a book, with its sources")
    ask.add_argument("question", help="the question, in quotes")
    ask.add_argument(
        "--book",
        action="append",
        help="book id (see `litrag books`); repeat for several; optional with one book loaded",
    )
    ask.add_argument(
        "--upto-chapter",
        type=int,
        metavar="N",
        help="spoiler limit: use nothing past chapter N (1-based reading order)",
    )
    ask.add_argument("--no-llm", action="store_true", help="extractive answer, no LLM")
    ask.add_argument(
        "--no-route",
        action="store_true",
        help="plain passage retrieval: no narrative tools (profiles, outlines, plotlines)",
    )
    ask.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    ask.add_argument("--retrieval", choices=["embedded", "paper"], help="retrieval preset")
    ask.add_argument(
        "--top-k",
        type=int,
        help="blocks retrieved for the LLM (default 5; the packaged local model reads the best "
        "of them whole, up to $LITRAG_READ_WORDS words, default 650)",
    )
    ask.add_argument(
        "--timeout", type=float, help="seconds the LLM may stay silent (default 120; local 900)"
    )
    ask.add_argument("--full", action="store_true", help="print whole passages, not excerpts")
    add_backend_flag(ask)
    ask.set_defaults(func=_cmd_ask)

    cht = sub.add_parser("chat", help="the chat UI in the browser (Gradio), on 127.0.0.1")
    cht.add_argument("paths", nargs="*", type=Path, help="books (files or folders) to add first")
    cht.add_argument("--book-dir", type=Path, help="a folder of .txt books to add first")
    cht.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    cht.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    add_serving_flags(cht)
    cht.add_argument("--no-llm", action="store_true", help="extractive answers, no LLM")
    cht.add_argument("--max-mb", type=float, help="upload size limit in MB (default 16)")
    cht.add_argument("--segmenter", choices=["offline", "litseg-lite", "litseg"])
    add_backend_flag(cht)
    cht.add_argument(
        "--share",
        action="store_true",
        help="a public Gradio link (off by default; needs internet and an API key)",
    )
    cht.set_defaults(func=_cmd_chat)
