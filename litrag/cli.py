"""The ``litrag`` command line."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from litrag import settings

BUNDLED_BOOK = Path(__file__).parent / "data" / "pg215_call_of_the_wild.txt"


def _llm_from_args(args: argparse.Namespace) -> Any:
    """The LLM asked for on the command line, or None for the offline segmenter."""
    if args.llm_url:
        from litrag.local_llm import openai_like

        return openai_like(args.llm_url, args.model or "local", timeout=args.timeout)
    return None


def _row(node: Any) -> dict[str, Any]:
    """One block as a JSON-ready record."""
    m = node.metadata
    return {
        "book_id": m.get("book_id"),
        "chapter_index": m.get("chapter_index"),
        "chapter_title": m.get("chapter_title"),
        "subtitle": m["subtitle"],
        "sentence_from": m["sentence_from"],
        "sentence_to": m["sentence_to"],
        "context_idx": m["context_idx"],
        "start_char_idx": node.start_char_idx,
        "end_char_idx": node.end_char_idx,
        "words": len(node.get_content().split()),
        "outcome": m["segmentation_outcome"],
        "attempts": m["segmentation_attempts"],
        "text": node.get_content(),
    }


def _cmd_segment(args: argparse.Namespace) -> int:
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import BookLoadError, load_book
    from litrag.segment import LitSegNodeParser

    if args.book is None:
        args.book = BUNDLED_BOOK
        print(f"no BOOK given: segmenting the bundled {BUNDLED_BOOK.name}", file=sys.stderr)
    try:
        book = load_book(args.book)
    except BookLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    docs = split_chapters(book)
    if args.chapters:
        wanted = {int(x) for x in args.chapters.split(",")}
        docs = [d for d in docs if d.metadata.get("chapter_index") in wanted]
    server = None
    llm = _llm_from_args(args)
    if llm is None and args.local_llm:
        from litrag.local_llm import LlamaServer, local_model_path, openai_like

        server = LlamaServer(local_model_path(args.local_llm), n_ctx=args.n_ctx)
        server.__enter__()
        llm = openai_like(
            server.api_base, server.model, context_window=args.n_ctx, timeout=args.timeout
        )
    segmenter = args.segmenter or ("litseg-lite" if llm is not None else "offline")
    try:
        parser = LitSegNodeParser.from_defaults(
            llm=llm,
            segmenter=segmenter,
            max_unit_words=args.max_unit_words,
            max_retries=args.max_retries,
            num_workers=args.workers,
            cache_dir=args.cache_dir or (settings.home() / "cache" if llm is not None else None),
            request_timeout=args.timeout,
        )
        t0 = time.perf_counter()
        nodes = parser.get_nodes_from_documents(docs, show_progress=not args.quiet)
        elapsed = time.perf_counter() - t0
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    rows = [_row(node) for node in nodes]
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    elif not args.quiet:
        for row in rows:
            print(
                f"{row['chapter_index']!s:>4} [{row['sentence_from']}-{row['sentence_to']}]"
                f" {row['words']:>4}w  {row['subtitle']}"
            )
    summary = parser.summary.as_dict()
    summary.update(
        book=book.title,
        segmenter=segmenter,
        seconds=round(elapsed, 2),
        words_per_second=round(sum(len(d.text.split()) for d in docs) / max(elapsed, 1e-9)),
    )
    print(json.dumps(summary, indent=None if args.quiet else 2), file=sys.stderr)
    return 0


def _settings(args: argparse.Namespace) -> Any:
    from litrag.settings import Settings

    s = Settings()
    for name in ("segmenter", "workers", "max_mb"):
        value = getattr(args, name, None)
        if value is not None:
            setattr(s, name, value)
    return s


def _cmd_ingest(args: argparse.Namespace) -> int:
    from litrag.builders import build_library
    from litrag.query.edge_store import StoreLockedError
    from litrag.query.stores import store_description

    s = _settings(args)
    print(f"library: {s.home} ({store_description(s.qdrant_url)})", file=sys.stderr)
    try:
        library = build_library(s)
    except StoreLockedError as exc:
        print(f"error: {_locked_message(s.home, exc)}", file=sys.stderr)
        return 2
    report = library.ingest(
        args.paths, show_progress=not args.quiet, on_event=lambda m: print(m, file=sys.stderr)
    )
    for book_id, secs in report.seconds.items():
        print(f"{book_id}: " + ", ".join(f"{k} {v:.1f}s" for k, v in secs.items()))
    print(
        f"ingested {len(report.ingested)}, unchanged {len(report.unchanged)}, "
        f"failed {len(report.failed)}"
    )
    for _path, reason in report.failed:
        print(f"error: {reason}", file=sys.stderr)
    return 0 if report.ok else 1


def _cmd_books(args: argparse.Namespace) -> int:
    from litrag.ingestion.library import Library

    s = _settings(args)
    rows = Library.read_registry(s.home)
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no books in {s.home}; add some with: litrag ingest BOOK.txt")
        return 0
    head = ("id", "title", "author", "chapters", "nodes", "segmenter", "ingested at")
    table = [
        (
            r.book_id,
            r.title,
            r.author or "",
            str(r.chapters),
            str(r.nodes),
            r.segmenter,
            r.ingested_at if r.status == "complete" else f"({r.status})",
        )
        for r in rows
    ]
    widths = [min(max(len(x[i]) for x in [head, *table]), 40) for i in range(len(head))]
    for row in [head, *table]:
        print("  ".join(cell[:40].ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    from litrag.ingestion.library import Library
    from litrag.query.stores import make_vector_store

    s = _settings(args)
    if not any(r.book_id == args.book for r in Library.read_registry(s.home)):
        print(f"error: no book {args.book!r} in {s.home} (see: litrag books)", file=sys.stderr)
        return 2
    from litrag.query.edge_store import StoreLockedError

    try:
        store = make_vector_store(s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key)
    except StoreLockedError as exc:
        print(f"error: {_locked_message(s.home, exc)}", file=sys.stderr)
        return 2
    Library(s.home, store).remove(args.book)
    print(f"removed {args.book}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    import warnings

    from qdrant_client import QdrantClient

    from litrag.query.edge_store import QdrantEdgeVectorStore, StoreLockedError
    from litrag.query.export import export_library
    from litrag.query.stores import qdrant_client_settings

    s = _settings(args)
    folder = s.home / "index" / s.collection
    if not folder.exists():
        print(f"error: no embedded library at {folder}", file=sys.stderr)
        return 2
    try:
        source = QdrantEdgeVectorStore(path=s.home / "index", collection_name=s.collection)
    except StoreLockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = QdrantClient(**qdrant_client_settings(args.to, s.qdrant_api_key))
    target = args.collection or s.collection
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect")
        report = export_library(
            source,
            client,
            target,
            progress_file=s.home / "export-progress.json",
            shards=args.shards,
            replication_factor=args.replication_factor,
        )
    source.close()
    print(
        f"exported {report.exported} points to {args.to} collection {target!r}"
        f" (skipped {report.skipped} already there); source {report.source_count}, "
        f"target {report.target_count}: {'verified' if report.verified else 'COUNTS DIFFER'}"
    )
    return 0 if report.verified else 1


def _cmd_eval_retrieval(args: argparse.Namespace) -> int:
    """`litrag eval retrieval`: every chunker x mode on a question set, reports into --out."""
    import shlex

    from litrag.eval.report import check_section, markdown, write_reports, write_section
    from litrag.eval.retrieval import (
        LLM_CHUNKERS,
        ChunkerLLM,
        evaluate_retrieval,
        load_questions,
        parse_modes,
    )
    from litrag.local_llm import LocalModelError

    data = Path(os.environ.get("LITRAG_DATA") or "../shared/data")
    qfile = args.questions or data / "gutenqa" / "questions.jsonl"
    books = args.books or qfile.resolve().parent.parent
    out = args.out or settings.home() / "eval-results"
    if args.report is not None:
        try:
            if args.report.suffix != ".md":
                raise ValueError(f"--report wants a .md path, got {args.report}")
            check_section(args.section)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    def report(run: Any, cmd: str) -> dict[str, Path]:
        if args.report is None:
            return write_reports(run, out, cmd)
        return write_section(run, args.report, args.section, cmd)

    command = "litrag " + " ".join(shlex.quote(a) for a in args.argv)
    say = lambda m: print(m, file=sys.stderr)  # noqa: E731
    chunkers = args.chunkers.split(",")
    kinds = args.modes.split(",")
    if args.reranker and "hybrid+rerank" not in kinds:
        kinds.append("hybrid+rerank")
    wants_llm = [k for k in chunkers if k in LLM_CHUNKERS]
    if (args.llm_url or args.local_llm) and not wants_llm:
        say("note: an LLM is given but no LLM chunker is chosen (" + ", ".join(LLM_CHUNKERS) + ")")
    server = None
    try:
        questions = load_questions(qfile)
        if args.only_books:
            wanted = args.only_books.split(",")
            questions = [q for q in questions if any(w in q.book_file for w in wanted)]
        modes = parse_modes(
            kinds,
            args.fusion.split(","),
            [float(a) for a in args.alpha.split(",")],
        )
        setup = None
        if wants_llm:
            llm, identity, path = _llm_from_args(args), "", None
            if llm is None and args.local_llm:
                from litrag.local_llm import LlamaServer, local_model_path, openai_like

                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server too
                path = local_model_path(args.local_llm)
                say(f"starting the local LLM {path.name} (llama.cpp, n_ctx {args.n_ctx}) ...")
                server = LlamaServer(path, n_ctx=args.n_ctx, n_threads=args.llm_threads).start()
                llm = openai_like(
                    server.api_base, server.model, context_window=args.n_ctx, timeout=args.timeout
                )
                identity = f"llama.cpp:{path.name}"  # stable across runs; the port is not
            if llm is not None:
                workers = args.workers or (1 if server is not None else 4)
                setup = ChunkerLLM(
                    llm,
                    identity=identity,
                    workers=workers,
                    max_unit_words=args.max_unit_words,
                    max_retries=args.max_retries,
                    timeout=args.timeout,
                    model_path=path if server is not None else None,
                )
        reranker = None
        if args.reranker:
            from litrag.query.rerank import Qwen3Reranker

            reranker = Qwen3Reranker(model_path=args.reranker, top_n=None)
        run = evaluate_retrieval(
            questions,
            books,
            chunkers,
            modes,
            cache_dir=args.cache_dir or settings.home() / "eval-cache",
            top_k=args.top_k,
            candidates=args.candidates,
            view=args.view,
            dense_vectors=args.dense_vectors,
            bm25_avg_len=args.bm25_avg_len,
            intrinsic=not args.no_intrinsic,
            llm=setup,
            reranker=reranker,
            max_chapters=args.max_chapters,
            say=say,
            on_chunker=lambda partial: report(partial, command + "  # (partial)"),
        )
    except (OSError, ValueError, LocalModelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.stop()
    paths = report(run, command)
    print(markdown(run, command))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    return 0


def _cmd_eval_answers(args: argparse.Namespace) -> int:
    """`litrag eval answers`: answer a question set, score it (and judge it), reports into --out."""
    import shlex

    from litrag.builders import build_answer_llm
    from litrag.eval.answer_metrics import AnswerScorer
    from litrag.eval.answer_report import markdown, write_reports
    from litrag.eval.answers import (
        DATASETS,
        Generator,
        build_judge,
        evaluate_answers,
        load_answer_questions,
        select_questions,
    )
    from litrag.local_llm import LocalModelError
    from litrag.query.edge_store import StoreLockedError
    from litrag.query.retriever import RetrievalSettings, UnknownBookError
    from litrag.settings import Settings, focus_words

    previous = None
    if threading.current_thread() is threading.main_thread():  # the LLM server must not outlive us
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    data = Path(os.environ.get("LITRAG_DATA") or "../shared/data")
    qfile = args.questions or data / DATASETS[args.dataset]
    books = args.books or qfile.resolve().parent.parent
    out = args.out or settings.home() / "eval-results"
    cache_dir = args.cache_dir or settings.home() / "eval-cache"
    command = "litrag " + " ".join(shlex.quote(a) for a in args.argv)
    say = lambda m: print(m, file=sys.stderr)  # noqa: E731
    s = Settings()
    if args.timeout is not None:
        s.llm_timeout = args.timeout
    answer_llm = judge_closer = None
    try:
        questions, dropped = load_answer_questions(qfile, args.dataset, books)
        wanted = args.only_books.split(",") if args.only_books else []
        questions, dropped_ids = select_questions(questions, wanted, args.limit, dropped)
        if not questions:
            raise ValueError(f"no questions left in {qfile} after --only-books / --limit")
        retrieval = RetrievalSettings.from_env(args.retrieval or s.retrieval)
        if args.top_k:
            retrieval.top_k = args.top_k
        order = args.passage_order or s.passage_order
        words = focus_words(s) if args.focus_words is None else max(args.focus_words, 0)
        generator = Generator(
            answer_tokens=args.answer_tokens, passage_order=order, focus_words=words
        )
        if not args.no_llm:
            if not s.llm_url:
                say(f"starting the local LLM ({s.local_llm}) ...")
            answer_llm = build_answer_llm(s, max_tokens=args.answer_tokens)
            generator = Generator(
                answer_llm.llm, answer_llm.description, args.answer_tokens, order, words
            )
        judge, judge_closer = build_judge(
            s,
            local=args.judge == "local",
            url=args.judge_url,
            model=args.judge_model,
            answer_llm=answer_llm,
            max_retries=args.judge_retries,
            timeout=args.timeout,
        )
        run = evaluate_answers(
            questions,
            books,
            cache_dir=cache_dir,
            dataset=args.dataset,
            chunker=args.chunker,
            generator=generator,
            judge=judge,
            scorer=AnswerScorer.create(args.bertscore or os.environ.get("LITRAG_BERTSCORE_MODEL")),
            retrieval=retrieval,
            library=s if args.library else None,
            dropped=dropped_ids,
            say=say,
        )
    except (OSError, ValueError, LocalModelError, StoreLockedError, UnknownBookError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for held in (answer_llm, judge_closer):
            if held is not None:
                held.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    paths = write_reports(run, out, command)
    print(markdown(run, command))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    return 0


def _close_store(engine: Any) -> None:
    store = engine.retriever.vector_store
    if hasattr(store, "close"):
        store.close()


def _cmd_ask(args: argparse.Namespace) -> int:
    """`litrag ask`: a streamed, cited answer; failures are one line and keep the sources."""
    from litrag.builders import build_answer_llm, build_query_engine
    from litrag.ingestion.library import Library
    from litrag.local_llm import LocalModelError
    from litrag.query.edge_store import StoreLockedError
    from litrag.query.retriever import RetrievalSettings, UnknownBookError
    from litrag.settings import Settings

    def fail(msg: str, code: int = 2) -> int:
        print(f"error: {msg}", file=sys.stderr)
        return code

    question = " ".join(args.question.split())
    if not question:
        return fail("the question is empty")
    # SIGTERM runs the `finally` below too: the local LLM server must not outlive us.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    s = Settings()
    if args.timeout is not None:
        s.llm_timeout = args.timeout
    books = args.book or [r.book_id for r in Library.read_registry(s.home)][:2]
    if len(books) != 1 and not args.book:  # no --book: fine only when one book is loaded
        return fail(
            "choose a book with --book ID (see: litrag books)"
            if books
            else f"no books in {s.home}; add one with: litrag ingest BOOK.txt"
        )
    try:
        retrieval = RetrievalSettings.from_env(args.retrieval or s.retrieval)
        if args.top_k:
            retrieval.top_k = args.top_k
        engine = build_query_engine(s, books, upto_chapter=args.upto_chapter, retrieval=retrieval)
    except StoreLockedError as exc:  # a running chat UI holds the library: ask through it
        return _ask_through_ui(args, s, books, question, exc)
    except (UnknownBookError, ValueError) as exc:
        return fail(str(exc))
    answer_llm = None
    llm_error = None
    try:
        if not args.no_llm:
            if not s.llm_url and not args.json:
                print(f"starting the local LLM ({s.local_llm}) ...", file=sys.stderr)
            try:
                answer_llm = build_answer_llm(s)
            except LocalModelError as exc:  # keep going: the retrieval results are still shown
                llm_error = f"the local LLM did not start: {str(exc).splitlines()[0]}"
            else:
                engine.llm, engine.answered_by = answer_llm.llm, answer_llm.description
                engine.llm_health = answer_llm.diagnose
        stream = engine.ask(question)
        _close_store(engine)  # the sources are in hand: free the library for other processes
        if not args.json:
            for piece in stream:
                print(piece, end="", flush=True)
            print()
        answer = stream.answer()
        if llm_error:  # the answer above is extractive (labelled so); say why
            answer.error = llm_error
    finally:
        if answer_llm is not None:
            answer_llm.close()
        _close_store(engine)
    return _print_answer(args, answer)


def _print_answer(args: argparse.Namespace, answer: Any) -> int:
    """The end of `litrag ask`: JSON, or the error line and the sources (the text streamed)."""
    if args.json:
        print(json.dumps(answer.model_dump(), indent=2, ensure_ascii=False))
    else:
        if answer.error:
            print(f"error: {answer.error}", file=sys.stderr)
        limit = f", up to chapter {args.upto_chapter}" if args.upto_chapter is not None else ""
        print(f"\nSources ({answer.retrieval}{limit}; answered by {answer.answered_by}):")
        for src in answer.sources:
            print(src.citation())
            text = " ".join(src.text.split())
            if not args.full and len(text) > 400:
                text = text[:400].rsplit(" ", 1)[0] + " ..."
            print(f"    {text}")
        if not answer.sources:
            print("(none)")
    return 1 if answer.error else 0


def _locked_message(home: Path, exc: Exception) -> str:
    """A writing command met a held store: name the chat UI when it is the holder."""
    from litrag.app.handoff import running_ui

    ui = running_ui(home)
    if ui is None:
        return str(exc)
    return (
        f"the library {home} is held by {ui.describe()}: add books with its upload panel, "
        "or stop the UI first"
    )


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
        )
        for piece in stream:
            if not args.json:
                print(piece, end="", flush=True)
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

    s = _settings(args)
    paths = list(args.paths or [])
    if args.book_dir:
        paths.append(args.book_dir)
    return run_chat(
        s,
        host=args.host,
        port=args.port,
        paths=paths,
        no_llm=args.no_llm,
        share=args.share,
    )


def _cmd_doctor(args: argparse.Namespace) -> int:
    """`litrag doctor`: one line per check as it finishes; exit 1 when any check failed."""
    from litrag.doctor import as_json, format_check, run_checks
    from litrag.settings import Settings

    say = None if args.json else (lambda c: print(format_check(c), flush=True))
    checks = run_checks(
        Settings(), generate=not args.no_generate, local_model=args.local_llm, say=say
    )
    if args.json:
        print(as_json(checks))
    return 1 if any(c.status == "fail" for c in checks) else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="litrag", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    seg = sub.add_parser("segment", help="cut a book into plot blocks and print or save them")
    seg.add_argument(
        "book",
        type=Path,
        nargs="?",
        help="a Project Gutenberg (or plain) .txt file (default: the bundled novel)",
    )
    seg.add_argument("--segmenter", choices=["offline", "litseg-lite", "litseg"])
    seg.add_argument("--llm-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    seg.add_argument("--model", help="model name at --llm-url")
    seg.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-1.5b"],
        help="start the packaged llama.cpp model as the LLM (needs the local-llm extra)",
    )
    seg.add_argument("--n-ctx", type=int, default=8192, help="context of the local LLM")
    seg.add_argument("--chapters", help="only these chapter indices, e.g. 1,2,5")
    seg.add_argument("--max-unit-words", type=int, default=25_000)
    seg.add_argument("--max-retries", type=int, default=20)
    seg.add_argument("--workers", type=int, default=4, help="LLM calls in flight")
    seg.add_argument("--timeout", type=float, default=600.0, help="seconds per LLM call")
    seg.add_argument("--cache-dir", help="LLM reply cache (default: $LITRAG_HOME/cache)")
    seg.add_argument("--out", help="write blocks as JSONL here instead of printing them")
    seg.add_argument("-q", "--quiet", action="store_true")
    seg.set_defaults(func=_cmd_segment)

    ing = sub.add_parser("ingest", help="add Gutenberg books (files or folders) to the library")
    ing.add_argument("paths", nargs="+", type=Path)
    ing.add_argument("--segmenter", choices=["offline", "litseg-lite", "litseg"])
    ing.add_argument("--workers", type=int, help="LLM calls in flight (LLM segmenters)")
    ing.add_argument("--max-mb", type=float, help="refuse books larger than this (default 16)")
    ing.add_argument("-q", "--quiet", action="store_true")
    ing.set_defaults(func=_cmd_ingest)

    bks = sub.add_parser("books", help="list the books in the library")
    bks.add_argument("--json", action="store_true")
    bks.set_defaults(func=_cmd_books)

    rem = sub.add_parser("remove", help="remove a book from the library")
    rem.add_argument("book", help="book id, as `litrag books` shows it")
    rem.set_defaults(func=_cmd_remove)

    exp = sub.add_parser("export", help="copy the embedded library to a Qdrant server/cluster")
    exp.add_argument("--to", required=True, help="Qdrant URL (API key from QDRANT_API_KEY)")
    exp.add_argument("--collection", help="target collection (default: the same name)")
    exp.add_argument("--shards", type=int, help="shard_number of a new target collection")
    exp.add_argument("--replication-factor", type=int, help="of a new target collection")
    exp.set_defaults(func=_cmd_export)

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
    ask.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    ask.add_argument("--retrieval", choices=["embedded", "paper"], help="retrieval preset")
    ask.add_argument("--top-k", type=int, help="blocks given to the LLM (default 5)")
    ask.add_argument(
        "--timeout", type=float, help="seconds the LLM may stay silent (default 120; local 900)"
    )
    ask.add_argument("--full", action="store_true", help="print whole passages, not excerpts")
    ask.set_defaults(func=_cmd_ask)

    cht = sub.add_parser("chat", help="the chat UI in the browser (Gradio), on 127.0.0.1")
    cht.add_argument("paths", nargs="*", type=Path, help="books (files or folders) to add first")
    cht.add_argument("--book-dir", type=Path, help="a folder of .txt books to add first")
    cht.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    cht.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    cht.add_argument("--no-llm", action="store_true", help="extractive answers, no LLM")
    cht.add_argument("--max-mb", type=float, help="upload size limit in MB (default 16)")
    cht.add_argument("--segmenter", choices=["offline", "litseg-lite", "litseg"])
    cht.add_argument(
        "--share", action="store_true", help="a public Gradio link (off by default; needs internet)"
    )
    cht.set_defaults(func=_cmd_chat)

    doc = sub.add_parser(
        "doctor", help="check the CPU, the llama.cpp build, models, store and LLM; what is wrong"
    )
    doc.add_argument(
        "--no-generate", action="store_true", help="skip the short generation (model load)"
    )
    doc.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-1.5b"],
        help="generate with this packaged model (default: what `litrag ask` uses)",
    )
    doc.add_argument("--json", action="store_true", help="the checks as JSON")
    doc.set_defaults(func=_cmd_doctor)

    from litrag.eval.retrieval import ALL_CHUNKERS, DEFAULT_CHUNKERS, DEFAULT_TOP_K

    ev = sub.add_parser("eval", help="evaluation harness").add_subparsers(
        dest="what", required=True
    )
    er = ev.add_parser("retrieval", help="GutenQA-style retrieval, every chunker side by side")
    er.add_argument("--questions", type=Path, help="JSONL (default: $LITRAG_DATA/gutenqa/...)")
    er.add_argument("--books", type=Path, help="where book_file paths resolve (default: data dir)")
    er.add_argument("--only-books", help="comma list of substrings of book_file to keep")
    er.add_argument(
        "--chunkers",
        default=",".join(DEFAULT_CHUNKERS),
        help=f"comma list of {', '.join(ALL_CHUNKERS)} (default: every chunker that needs no LLM; "
        "the LLM ones are opt-in)",
    )
    er.add_argument(
        "--modes",
        default="dense,bm25,hybrid",
        help="dense, bm25, hybrid, hybrid+rerank (added by --reranker)",
    )
    er.add_argument("--fusion", default="rsf,rrf", help="hybrid fusions: rsf (relative score), rrf")
    er.add_argument(
        "--alpha", default="0.3,0.5", help="dense weight(s) in hybrid (0.3: the embedded preset)"
    )
    er.add_argument("--top-k", type=int, default=DEFAULT_TOP_K)
    er.add_argument("--candidates", type=int, help="per-list depth before fusion (default top-k)")
    er.add_argument(
        "--view",
        choices=["embed", "text"],
        default="embed",
        help="index the embedding view (metadata, subtitle, context) or bare text",
    )
    er.add_argument(
        "--dense-vectors",
        choices=["windows", "block"],
        default="windows",
        help="dense search over each chunk's sentence windows (MaxSim, as the library) or one "
        "vector per chunk",
    )
    er.add_argument("--bm25-avg-len", type=float, help="fixed BM25 avg_len (default: per book)")
    er.add_argument("--no-intrinsic", action="store_true", help="skip the boundary metric")
    er.add_argument("--cache-dir", type=Path, help="default: $LITRAG_HOME/eval-cache")
    er.add_argument("--out", type=Path, help="report folder (default: $LITRAG_HOME/eval-results)")
    er.add_argument(
        "--report",
        type=Path,
        help="write the run as one section of this .md (JSON and plot beside it) instead of "
        "--out; other sections stay: `--report docs/results.md` refreshes the repo's numbers",
    )
    er.add_argument(
        "--section",
        default="default",
        help="section of --report this run replaces (default: default)",
    )
    er.add_argument(
        "--max-chapters",
        type=int,
        help="only each book's first N chapters (a sub-corpus for slow chunkers; questions "
        "outside are dropped)",
    )
    er.add_argument("--llm-url", help="LLM chunkers: OpenAI-compatible endpoint (…/v1)")
    er.add_argument("--model", help="model name at --llm-url")
    er.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-1.5b"],
        help="LLM chunkers: start the packaged llama.cpp model (needs the local-llm extra)",
    )
    er.add_argument("--n-ctx", type=int, default=8192, help="context of the local LLM")
    er.add_argument(
        "--llm-threads",
        type=int,
        help="threads of the local LLM (default: all cores; 1 is faster on a busy machine)",
    )
    er.add_argument(
        "--workers", type=int, help="LLM calls in flight (default 4; 1 with --local-llm)"
    )
    er.add_argument(
        "--max-unit-words",
        type=int,
        default=25_000,
        help="LitSeg: split longer chapters first (lower it for small-context LLMs)",
    )
    er.add_argument("--max-retries", type=int, default=20, help="LLM chunkers: retries (paper)")
    er.add_argument("--timeout", type=float, default=600.0, help="seconds per LLM call")
    er.add_argument(
        "--reranker", type=Path, help="local Qwen3-Reranker checkpoint: adds hybrid+rerank modes"
    )
    er.set_defaults(func=_cmd_eval_retrieval)

    ea = ev.add_parser("answers", help="answer a question set and score the answers")
    ea.add_argument("--dataset", choices=["gutenqa", "literaryqa"], default="gutenqa")
    ea.add_argument("--questions", type=Path, help="JSONL (default: the dataset's file in data)")
    ea.add_argument("--books", type=Path, help="where book files resolve (default: data dir)")
    ea.add_argument("--only-books", help="comma list of substrings of book_file to keep")
    ea.add_argument("--limit", type=int, help="the first N questions (after --only-books)")
    ea.add_argument("--chunker", default="litseg-offline", help="a chunker of `eval retrieval`")
    ea.add_argument(
        "--library", action="store_true", help="search the $LITRAG_HOME library, not --chunker"
    )
    ea.add_argument("--no-llm", action="store_true", help="extractive answers (the baseline)")
    ea.add_argument("--retrieval", choices=["embedded", "paper"], help="retrieval preset")
    ea.add_argument("--top-k", type=int, help="blocks given to the LLM (default 5)")
    ea.add_argument("--answer-tokens", type=int, default=256, help="answer length cap")
    ea.add_argument(
        "--passage-order",
        choices=["score", "story"],
        default=None,
        help="passages in the prompt by retrieval score or in reading order (default: "
        "$LITRAG_PASSAGE_ORDER, else the engine's default)",
    )
    ea.add_argument(
        "--focus-words",
        type=int,
        default=None,
        help="words of each passage the LLM reads (0: whole passages; default as `litrag ask`: "
        "$LITRAG_FOCUS_WORDS, else 110 for the local model, whole for a server)",
    )
    ea.add_argument("--judge", choices=["local"], help="judge with the packaged local LLM")
    ea.add_argument("--judge-url", help="judge LLM: an OpenAI-compatible endpoint")
    ea.add_argument("--judge-model", help="model name at --judge-url")
    ea.add_argument("--judge-retries", type=int, default=2, help="repairs of unreadable ratings")
    ea.add_argument(
        "--bertscore", help="BERTScore model: 'minilm' (packaged) or a local folder (default: off)"
    )
    ea.add_argument("--timeout", type=float, help="seconds an LLM may stay silent")
    ea.add_argument("--cache-dir", type=Path, help="default: $LITRAG_HOME/eval-cache")
    ea.add_argument("--out", type=Path, help="report folder (default: $LITRAG_HOME/eval-results)")
    ea.set_defaults(func=_cmd_eval_answers)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what reports quote as the command
    from litrag.settings import SettingsError

    try:
        return args.func(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `litrag segment | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
