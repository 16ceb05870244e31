"""``litrag eval retrieval`` and ``litrag eval answers``: the evaluation harness's commands."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from litrag import settings
from litrag.cli.common import (
    add_backend_flag,
    check_at_least,
    llm_from_args,
    local_server_llm,
    seconds,
    settings_from_args,
)


def _cmd_eval_retrieval(args: argparse.Namespace) -> int:
    """`litrag eval retrieval`: every chunker x mode on a question set, reports into --out."""
    import shlex

    from litrag.eval.questions import load_questions
    from litrag.eval.registry import LLM_CHUNKERS, ChunkerLLM
    from litrag.eval.report import check_section, markdown, write_reports, write_section
    from litrag.eval.retrieval import evaluate_retrieval, parse_modes
    from litrag.ingestion.input_file import read_input_bytes
    from litrag.models.llama_server import LocalModelError

    check_at_least(
        args, top_k=1, candidates=1, max_chapters=1, workers=1, llm_threads=1, max_unit_words=1
    )
    data = settings.data_dir()
    qfile = args.questions or data / "gutenqa" / "questions.jsonl"
    books = args.books or qfile.resolve().parent.parent
    out = args.out or settings.home() / "eval-results"
    if args.report is not None:
        try:
            if args.report.suffix != ".md":
                raise ValueError(f"--report wants a .md path, got {args.report}")
            if args.report.exists():  # rewritten after the run: a FIFO or device said now
                read_input_bytes(args.report, "--report")
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
            if not questions:
                raise ValueError(f"no question of {qfile} is about --only-books {args.only_books}")
        modes = parse_modes(kinds, _alphas(args.alpha))
        setup = None
        if wants_llm:
            llm, identity, path = llm_from_args(args), "", None
            if llm is None and args.local_llm:
                from litrag.builders import local_server

                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server too
                server = local_server(
                    settings.Settings(),
                    args.local_llm,
                    n_ctx=args.n_ctx,
                    start=False,
                    n_threads=args.llm_threads,
                )
                path = server.model_path
                say(f"starting the local LLM {path.name} (llama.cpp, n_ctx {args.n_ctx}) ...")
                server.start()
                llm = local_server_llm(args, server, args.n_ctx)
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
            from litrag.builders import build_reranker

            reranker = build_reranker(args.reranker, top_n=None)
        run = evaluate_retrieval(
            questions,
            books,
            chunkers,
            modes,
            cache_dir=args.cache_dir or settings.home() / "eval-cache",
            top_k=args.top_k,
            candidates=args.candidates,
            dense_vectors=args.dense_vectors,
            embed_model=args.embed_model,
            bm25_avg_len=args.bm25_avg_len,
            bm25_windows=args.bm25_windows,
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
    from litrag.eval.answers import Generator, evaluate_answers
    from litrag.eval.judge import build_judge
    from litrag.eval.questions import DATASETS, load_answer_questions, select_questions
    from litrag.models.llama_server import LocalModelError
    from litrag.retrieval.retriever import RetrievalSettings, UnknownBookError
    from litrag.settings import llm_backend, read_words
    from litrag.stores.edge_store import StoreLockedError

    check_at_least(args, top_k=1, limit=1, answer_tokens=1, judge_retries=0)
    _check_bertscore(args.bertscore, settings.bertscore_model())
    previous = None
    if threading.current_thread() is threading.main_thread():  # the LLM server must not outlive us
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    data = settings.data_dir()
    qfile = args.questions or data / DATASETS[args.dataset]
    books = args.books or qfile.resolve().parent.parent
    out = args.out or settings.home() / "eval-results"
    cache_dir = args.cache_dir or settings.home() / "eval-cache"
    command = "litrag " + " ".join(shlex.quote(a) for a in args.argv)
    say = lambda m: print(m, file=sys.stderr)  # noqa: E731
    s = settings_from_args(
        args
    )  # --timeout, --llm-backend over the environment: a bad value is one line
    answer_llm = judge_closer = None
    try:
        questions, dropped = load_answer_questions(qfile, args.dataset, books)
        wanted = args.only_books.split(",") if args.only_books else []
        questions, dropped_ids = select_questions(questions, wanted, args.limit, dropped)
        if not questions:  # the file has questions (the loader says so otherwise): the filter
            raise ValueError(f"no question of {qfile} is about --only-books {args.only_books}")
        retrieval = RetrievalSettings.from_settings(s, args.retrieval)
        if args.top_k:
            retrieval.top_k = args.top_k
        order = args.passage_order or s.passage_order
        read = read_words(s) if args.read_words is None else max(args.read_words, 0)
        generator = Generator(answer_tokens=args.answer_tokens, passage_order=order)
        if not args.no_llm:
            if llm_backend(s) == "local":
                say(f"starting the local LLM ({s.local_llm}) ...")
            answer_llm = build_answer_llm(s, max_tokens=args.answer_tokens)
            generator = Generator(
                answer_llm.llm, answer_llm.description, args.answer_tokens, order, read
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
            scorer=AnswerScorer.create(args.bertscore or settings.bertscore_model()),
            retrieval=retrieval,
            library=s if args.library else None,
            dropped=dropped_ids,
            say=say,
        )
    except (OSError, ValueError, LocalModelError, StoreLockedError, UnknownBookError) as exc:
        # BackendError is a ValueError: a backend that cannot be used is one line too
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


def _alphas(text: str) -> list[float]:
    """``--alpha 0.3,0.5``: dense weights, each 0 to 1; anything else names the flag (it was
    float()'s "could not convert string to float")."""
    out: list[float] = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = float("nan")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"--alpha wants weights from 0 to 1 like 0.3,0.5, got {text!r}")
        out.append(value)
    return out


def _check_bertscore(flag: str | None, env: str | None) -> None:
    """A BERTScore model asked for that is not there is an error naming the flag or variable;
    it was a silent "skipped" in the report, found after the whole run."""
    for name, given in (("--bertscore", flag), ("LITRAG_BERTSCORE_MODEL", env)):
        if not given:
            continue
        if given != "minilm" and not (Path(given).expanduser() / "config.json").is_file():
            raise settings.SettingsError(
                f"{name} must be 'minilm' or a local model folder with config.json, got {given!r}"
            )
        return  # the flag wins over the variable


def _cmd_eval_heldout(args: argparse.Namespace) -> int:
    """`litrag eval heldout`: the public set and held-out sets, same chunkers, one report."""
    import shlex

    from litrag.eval.heldout import QuestionSet, markdown
    from litrag.eval.questions import load_questions, question_styles
    from litrag.eval.report import check_section, replace_section
    from litrag.eval.retrieval import evaluate_retrieval, parse_modes
    from litrag.ingestion.input_file import read_input_bytes
    from litrag.models.llama_server import LocalModelError

    check_at_least(args, top_k=1)
    data = settings.data_dir()
    public_file = args.public or data / "gutenqa" / "questions.jsonl"
    books = args.books or public_file.resolve().parent.parent
    command = "litrag " + " ".join(shlex.quote(a) for a in args.argv)
    say = lambda m: print(m, file=sys.stderr)  # noqa: E731
    split = tuple(s for s in args.split.split(",") if s)
    sets: list[QuestionSet] = []
    try:
        if args.report is not None:
            if args.report.suffix != ".md":
                raise ValueError(f"--report wants a .md path, got {args.report}")
            if args.report.exists():  # rewritten after the run: a FIFO or device said now
                read_input_bytes(args.report, "--report")
            check_section(args.section)
        if not split:
            raise ValueError("--split names the books of half A, e.g. pg11,pg84,pg215")
        modes = parse_modes(args.modes.split(","), _alphas(args.alpha))
        paths = [public_file, *args.heldout]
        loaded = [load_questions(path) for path in paths]  # a bad file stops before any run
        for path, questions in zip(paths, loaded, strict=True):
            name = "public" if path == public_file else Path(path).stem
            say(f"== {name}: {path}")
            run = evaluate_retrieval(
                questions,
                books,
                args.chunkers.split(","),
                modes,
                cache_dir=args.cache_dir or settings.home() / "eval-cache",
                top_k=args.top_k,
                dense_vectors=args.dense_vectors,
                embed_model=args.embed_model,
                bm25_windows=args.bm25_windows,
                intrinsic=False,
                say=say,
            )
            sets.append(QuestionSet(name, run, question_styles(path)))
    except (OSError, ValueError, LocalModelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = markdown(sets[0], sets[1:], split, command)
    print(text)
    if args.report is not None:
        replace_section(args.report, args.section, "Held-out retrieval", text)
        print(f"wrote {args.report} (section {args.section})", file=sys.stderr)
    else:
        out = args.out or settings.home() / "eval-results"
        out.mkdir(parents=True, exist_ok=True)
        (out / "heldout.md").write_text(text, encoding="utf-8")
        print(f"wrote {out / 'heldout.md'}", file=sys.stderr)
    return 0


BM25_WINDOWS_HELP = (
    "weight of each chunk's best 3-sentence window in its BM25 score, 0 to 1 (default: the "
    "library's, 0.3; 0: block BM25 alone)"
)


EMBED_MODEL_HELP = (
    "the dense embedder: minilm (packaged, windowed; default), nomic (nomic-embed-text-v1.5, "
    "the quality preset: needs litrag[quality]) or a sentence-transformers folder"
)


def _unit_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {raw!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {raw!r}")
    return value


def add_parsers(sub: Any) -> None:
    """The ``eval`` command group: ``retrieval``, ``heldout`` and ``answers``, and their flags."""
    from litrag.eval.registry import ALL_CHUNKERS, DEFAULT_CHUNKERS
    from litrag.eval.retrieval import DEFAULT_TOP_K

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
        "CHUNKER>aligned ranks its blocks snapped to paragraph children through them, "
        "CHUNKER>blocks scores its blocks themselves; "
        "the LLM ones are opt-in)",
    )
    er.add_argument(
        "--modes",
        default="dense,bm25,hybrid",
        help="dense, bm25, hybrid, hybrid+rerank (added by --reranker)",
    )
    er.add_argument(
        "--alpha", default="0.3,0.5", help="dense weight(s) in hybrid (0.3: the embedded preset)"
    )
    er.add_argument("--top-k", type=int, default=DEFAULT_TOP_K)
    er.add_argument("--candidates", type=int, help="per-list depth before fusion (default top-k)")
    er.add_argument(
        "--dense-vectors",
        choices=["windows", "block"],
        default="windows",
        help="dense search over each chunk's sentence windows (MaxSim, as the library) or one "
        "vector per chunk",
    )
    er.add_argument("--embed-model", default="minilm", help=EMBED_MODEL_HELP)
    er.add_argument("--bm25-avg-len", type=float, help="fixed BM25 avg_len (default: per book)")
    er.add_argument("--bm25-windows", type=_unit_float, help=BM25_WINDOWS_HELP)
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
    add_backend_flag(er)
    er.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-coder-1.5b", "qwen2.5-1.5b"],
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
    er.add_argument("--timeout", type=seconds, default=600.0, help="seconds per LLM call")
    er.add_argument(
        "--reranker", type=Path, help="local Qwen3-Reranker checkpoint: adds hybrid+rerank modes"
    )
    er.set_defaults(func=_cmd_eval_retrieval)

    eh = ev.add_parser(
        "heldout",
        help="the public questions beside held-out sets and a book split, with the drop",
    )
    eh.add_argument(
        "--heldout",
        type=Path,
        action="append",
        required=True,
        help="a held-out question set (JSONL, as --questions); repeat for more, e.g. "
        "data/questions/dev_frozen.jsonl",
    )
    eh.add_argument("--public", type=Path, help="the public set (default: $LITRAG_DATA/gutenqa)")
    eh.add_argument("--books", type=Path, help="where book_file paths resolve (default: data dir)")
    eh.add_argument(
        "--split",
        default="pg11,pg84,pg215",
        help="book ids of half A of the book split (the others are half B)",
    )
    eh.add_argument(
        "--chunkers",
        default=",".join(DEFAULT_CHUNKERS),
        help="comma list, as `eval retrieval` (sized variants: litseg-offline@WORDS, "
        "paragraphs@WORDS; small-to-big: CHUNKER>aligned; CHUNKER>blocks)",
    )
    eh.add_argument("--modes", default="dense,bm25,hybrid", help="as `eval retrieval`")
    eh.add_argument("--alpha", default="0.3", help="dense weight(s) in hybrid (0.3: the library's)")
    eh.add_argument("--top-k", type=int, default=DEFAULT_TOP_K)
    eh.add_argument("--dense-vectors", choices=["windows", "block"], default="windows")
    eh.add_argument("--embed-model", default="minilm", help=EMBED_MODEL_HELP)
    eh.add_argument("--bm25-windows", type=_unit_float, help=BM25_WINDOWS_HELP)
    eh.add_argument("--cache-dir", type=Path, help="default: $LITRAG_HOME/eval-cache")
    eh.add_argument("--out", type=Path, help="report folder (default: $LITRAG_HOME/eval-results)")
    eh.add_argument("--report", type=Path, help="write into this .md as one section")
    eh.add_argument("--section", default="held-out", help="section of --report (default held-out)")
    eh.set_defaults(func=_cmd_eval_heldout)

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
    ea.add_argument(
        "--top-k",
        type=int,
        help="blocks retrieved for the LLM (default 5; the packaged local model reads the best "
        "of them whole, up to $LITRAG_READ_WORDS words, default 650)",
    )
    ea.add_argument("--answer-tokens", type=int, default=256, help="answer length cap")
    ea.add_argument(
        "--passage-order",
        choices=["score", "story"],
        default=None,
        help="passages in the prompt by retrieval score or in reading order (default: "
        "$LITRAG_PASSAGE_ORDER, else the engine's default)",
    )
    ea.add_argument(
        "--read-words",
        type=int,
        default=None,
        help="words the LLM reads in all: the best passages whole while they fit, the first "
        "always (0: all --top-k; default as `litrag ask`: $LITRAG_READ_WORDS, else 650 for the "
        "local model, all for a server)",
    )
    ea.add_argument("--judge", choices=["local"], help="judge with the packaged local LLM")
    ea.add_argument("--judge-url", help="judge LLM: an OpenAI-compatible endpoint")
    ea.add_argument("--judge-model", help="model name at --judge-url")
    add_backend_flag(ea)
    ea.add_argument("--judge-retries", type=int, default=2, help="repairs of unreadable ratings")
    ea.add_argument(
        "--bertscore", help="BERTScore model: 'minilm' (packaged) or a local folder (default: off)"
    )
    ea.add_argument("--timeout", type=float, help="seconds an LLM may stay silent")
    ea.add_argument("--cache-dir", type=Path, help="default: $LITRAG_HOME/eval-cache")
    ea.add_argument("--out", type=Path, help="report folder (default: $LITRAG_HOME/eval-results)")
    ea.set_defaults(func=_cmd_eval_answers)
