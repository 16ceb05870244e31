"""The Gradio chat: library panel, spoiler slider, streamed cited answers, uploads.

Per-session state (``gr.State``) holds a conversation's turns, so concurrent chats never share
history; the book selection and spoiler limit come with each request from the session's own
components. Everything shared (store, embedder, LLM) lives in the ``ChatService``.

Named API endpoints (``gradio_client``): ``/chat`` (what the Ask button runs), ``/select_books``,
``/add_books`` and ``/answer`` (one question, JSON; ``litrag ask`` uses it while the UI holds
the library).
"""

from __future__ import annotations

import hmac
import html
import json
import logging
import os
import queue
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # offline: nothing phones home

import gradio as gr
from gradio.utils import get_upload_folder as gradio_upload_folder
from llama_index.core.schema import NodeWithScore

from litrag.answering.answer import Answer, Source
from litrag.answering.ask_request import (
    MAX_QUESTION_CHARS,
    AskRequest,
    AskRequestError,
    spoiler_value,
)
from litrag.app.display import shown_subtitle
from litrag.app.hosts import LOOPBACK_NAMES, HostCheck
from litrag.app.service import CharacterProfile, ChatService, Turn
from litrag.narrative.excerpts import GAP
from litrag.retrieval.evidence import from_evidence
from litrag.segment.sentences import split_sentences

# System fonts only: the default theme fetches web fonts, and this app must work offline.
logger = logging.getLogger(__name__)

THEME = gr.themes.Soft(
    font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "DejaVu Sans Mono", "monospace"],
)
CSS = """
#answered-by { font-size: 0.85em; opacity: 0.8; }
#sources { max-height: 520px; overflow-y: auto; }
#sources blockquote { font-size: 0.92em; margin: 0.3em 0 0.8em 0; }
"""
# The question the empty box suggests (and the README asks): one about the bundled book that the
# default (packaged Qwen2.5-Coder-1.5B, whole book) answers right, checked by
# tests/test_example_question.py; a fair one, not the easiest (the answer lies in chapter II,
# among the dogs' fights, not in the opening lines).
EXAMPLE_QUESTION = "How did Curly die?"
PASSAGE_CHARS = 1200  # per source in the panel; the full block is in the JSON answer
PROFILE_PASSAGE_CHARS = 300  # per cited block under a character's profile
PROFILE_SOURCES = 40  # cited blocks listed under a profile (older assets cite every block)
_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")


# ------------------------------------------------------------------------------ rendering
_URL_START = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*):(?=//)|\b(www)\.")


def _esc(text: str) -> str:
    """Text of a book or a model inside Markdown, shown as written: HTML escaped (an
    ``<img src=...>`` is shown, never fetched by the reader's browser), Markdown's marks kept
    literal (no link, no image, no emphasis), and a URL's ``://`` or ``www.`` escaped so the
    renderer does not turn it into a link."""
    out = re.sub(r"([*_`#\[\]])", r"\\\1", html.escape(text, quote=False))
    return _URL_START.sub(lambda m: f"{m.group(1)}\\:" if m.group(1) else "www\\.", out)


def render_text(text: str) -> str:
    """A model's or a reader's text for the chat bubble, shown as written (``_esc``); the
    Chatbot keeps its line breaks."""
    return _esc(text)


def read_parts(src: Source) -> list[str]:
    """The sentences the LLM read of a source it read cut (none when it read it whole)."""
    if not src.excerpt:
        return []
    return [s.flat for part in src.excerpt.split(GAP) for s in split_sentences(part)]


def render_passage(src: Source, evidence: Sequence[str] = ()) -> str:
    """The passage, cut to ``PASSAGE_CHARS``; ``evidence`` (the sentences an extractive answer
    quotes, or those the LLM read of a cut source) in bold. A block ranked through its
    paragraphs opens at the paragraph that ranked it (``Source.evidence``), so the reader sees
    that part first."""
    text, moved = from_evidence(src.text, src.evidence, PASSAGE_CHARS)
    if moved:  # the paragraph would be cut off: open on it
        text = "… " + text
    if len(text) > PASSAGE_CHARS:
        text = text[:PASSAGE_CHARS].rsplit(" ", 1)[0] + " …"
    out = _esc(text)
    for sentence in evidence:
        flat = _esc(" ".join(sentence.split()))
        if flat and flat in out:
            out = out.replace(flat, f"**{flat}**", 1)
    return out


def render_sources(answer: Answer | None) -> str:
    """The sources panel: every block the answer used (book, chapter, subtitle, sentences)."""
    if answer is None:
        return "*Sources of the answer appear here.*"
    if not answer.sources:
        return "*No passage matched (nothing was retrieved).*"
    parts = []
    for src in answer.sources:
        head = (
            f"**[{src.rank}] {_esc(src.book_title)}** · {_esc(src.chapter_title)} "
            f"(ch. {src.chapter_index}) · sentences {src.sentence_from}–{src.sentence_to}"
        )
        bold = answer.evidence or read_parts(src)
        parts.append(f"{head}  \n*{_esc(shown_subtitle(src))}*\n\n> {render_passage(src, bold)}")
    return "\n\n".join(parts)


def render_citations(answer: Answer) -> str:
    """Short list under an answer in the chat (the passages are in the sources panel)."""
    return "\n".join(
        f"{s.rank}. {_esc(s.book_title)}, {_esc(s.chapter_title)} (ch. {s.chapter_index}), "
        f"sentences {s.sentence_from}–{s.sentence_to}: *{_esc(shown_subtitle(s))}*"
        for s in answer.sources
    )


def details(text: str) -> str:
    """``text`` behind a closed "Details" toggle under the answer: how it was retrieved (the
    segmenter, the retrieval preset and its fusion, the store) is there for whoever asks, not in
    every reader's way."""
    return f"\n\n<details><summary>Details</summary>\n\n{text}\n\n</details>"


def _cut(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " …"


def render_profile(view: CharacterProfile | None) -> str:
    """One character as of the spoiler limit: the LLM assets' profile snapshot, each line
    citing the block it was read in (numbered as the chat's sources, the passages below);
    without assets, what the offline index knows."""
    if view is None:
        return "*Nobody of that name is met up to this chapter.*"
    c, upto = view.character, view.upto
    cut = f" up to chapter {upto}" if upto is not None else ""
    lines = [
        f"**{_esc(c.name)}** · first named in chapter {c.first_chapter} · "
        f"{c.mentions()} mentions{cut}"
    ]
    node = view.profile
    if node is None:
        if view.has_assets:
            lines.append(f"*The book's LLM assets hold no profile of {_esc(c.name)}{cut}.*")
        else:
            lines.append(
                "*This book has no LLM assets yet (`litrag assets "
                f"{_esc(view.book_id)}` or `litrag ingest --assets` builds them).* "
                "From the offline character index:"
            )
        per = ", ".join(f"ch. {ch}: {n}" for ch, n in sorted(c.per_chapter.items()))
        lines.append(f"- mentions by chapter: {per or 'none'}")
        aliases = [a for a in c.aliases if a != c.name]
        if aliases:
            lines.append("- also named: " + ", ".join(_esc(a) for a in aliases))
        if view.companions:
            lines.append(
                "- most often with: "
                + ", ".join(
                    f"{_esc(name)} ({n} block{'s' if n != 1 else ''})"
                    for name, n in view.companions
                )
            )
        return "\n".join(lines)
    m = node.metadata
    cites = {int(i): str(b) for i, b in m.get("line_sources") or []}
    # The cited blocks (older assets: the profile's blocks), numbered in reading order.
    cited = list(dict.fromkeys(cites.values() or map(str, m.get("source_blocks") or [])))
    order = sorted(
        (b for b in cited if b in view.blocks),  # a block past the limit is never among them
        key=lambda b: (
            int(view.blocks[b].metadata.get("chapter_index", 0)),
            int(view.blocks[b].metadata.get("sentence_from", 0)),
        ),
    )
    number = {b: k for k, b in enumerate(order, 1)}

    def ref(block: str) -> str:
        return f" [{number[block]}]" if block in number else ""

    text = node.get_content().splitlines()
    for i, line in enumerate(text):
        mark = ref(cites[i]) if i in cites else ""
        if i == 0:
            lines.append(f"*{_esc(line)}*")
        elif line.endswith(":") and not line.startswith("- "):
            lines.append(f"\n**{_esc(line[:-1])}**\n")
        elif line.startswith("- "):
            lines.append(f"- {_esc(line[2:])}{mark}")
        else:
            lines.append(f"{_esc(line)}{mark}")
    if order:
        lines.append("\n**Sources**\n")
    for k, block in enumerate(order[:PROFILE_SOURCES], 1):
        src = Source.from_node(k, NodeWithScore(node=view.blocks[block]))
        lines.append(
            f"**[{k}]** {_esc(src.chapter_title)} (ch. {src.chapter_index}) · sentences "
            f"{src.sentence_from}–{src.sentence_to}  \n"
            f"> {_esc(_cut(src.text, PROFILE_PASSAGE_CHARS))}\n"
        )
    if len(order) > PROFILE_SOURCES:
        lines.append(f"*… and {len(order) - PROFILE_SOURCES} more blocks.*")
    return "\n".join(lines).rstrip()


def _sparkline(counts: Sequence[int]) -> str:
    """Mentions per chapter as one line of block characters (▁ none ... █ most)."""
    top = max(counts, default=0)
    if not top:
        return ""
    marks = " ▁▂▃▄▅▆▇█"
    return "".join(marks[0 if not n else max(1, round(8 * n / top))] for n in counts)


def _slider(upto: Any) -> int | None:
    """A spoiler slider's value as a chapter, or a ``gr.Error`` naming what was wrong."""
    try:
        return spoiler_value(upto, "the spoiler limit")
    except AskRequestError as exc:
        raise gr.Error(str(exc)) from None


def limit_text(upto: int | None) -> str:
    return f"spoiler limit: up to chapter {upto}" if upto is not None else "no spoiler limit"


# ------------------------------------------------------------------------------ the app
class ChatApp:
    """The UI's handlers over one ``ChatService``; ``blocks()`` lays them out."""

    def __init__(self, service: ChatService) -> None:
        self.service = service

    # -- library panel ------------------------------------------------------------------
    def book_choices(self) -> list[tuple[str, str]]:
        return [
            (f"{r.title} ({r.book_id}, {r.chapters} ch.)", r.book_id) for r in self.service.books()
        ]

    def max_chapter(self, book_ids: Sequence[str]) -> int:
        last = [c for b in book_ids for c, _ in self.service.chapters(b)]
        if last:
            return max(last)
        rows = {r.book_id: r.chapters for r in self.service.books()}
        return max((rows.get(b, 1) for b in book_ids), default=1)

    def chapters_markdown(self, book_ids: Sequence[str], upto: float | None = None) -> str:
        """The chapter titles a reader at the slider has read; past the spoiler limit only
        their count (a title such as "The Death of ..." is a spoiler)."""
        if not book_ids:
            return "*Choose one or more books above.*"
        limit = self.spoiler_limit(book_ids, upto)
        titles = {r.book_id: r.title for r in self.service.books()}
        parts = []
        for b in book_ids:
            rows = self.service.chapters(b)
            shown = [(i, t) for i, t in rows if limit is None or i <= limit]
            lines = "\n".join(f"{i}. {_esc(t)}" if i else f"- {_esc(t)}" for i, t in shown)
            hidden = len(rows) - len(shown)
            if hidden:
                lines += (
                    f"\n\n*{hidden} more part{'s' * (hidden != 1)} past your spoiler limit "
                    "(titles hidden).*"
                )
            parts.append(f"**{_esc(titles.get(b, b))}** ({len(rows)} parts)\n\n{lines}")
        return "\n\n".join(parts)

    def characters_markdown(
        self, book_ids: Sequence[str], upto: float | None, top: int = 15
    ) -> str:
        """The characters a reader at the slider has met: names, aliases, first chapter, a
        mention curve over the chapters read; nothing past the spoiler limit."""
        if not book_ids:
            return "*Choose a book above.*"
        limit = self.spoiler_limit(book_ids, upto)
        parts = []
        for b in book_ids:
            index = self.service.characters(b)
            if index is None:
                parts.append(
                    f"**{_esc(b)}**: no character index (ingest it again with "
                    "`litrag[narrative]` installed)."
                )
                continue
            people = index.upto(limit)
            last = max((ch for c in people for ch in c.per_chapter), default=0)
            rows = [
                "| character | mentions | first ch. | mentions by chapter | aliases |",
                "|---|---|---|---|---|",
            ]
            for c in people[:top]:
                curve = _sparkline([c.per_chapter.get(ch, 0) for ch in range(1, last + 1)])
                aliases = ", ".join(_esc(a) for a in c.aliases if a != c.name)
                rows.append(
                    f"| **{_esc(c.name)}** | {c.mentions()} | {c.first_chapter} | `{curve}` | "
                    f"{aliases} |"
                )
            cut = f" up to chapter {limit}" if limit is not None else ""
            parts.append(f"**{_esc(b)}**: {len(people)} characters{cut}\n\n" + "\n".join(rows))
        return "\n\n".join(parts)

    def character_choices(
        self, book_ids: Sequence[str], upto: float | None
    ) -> list[tuple[str, str]]:
        """The characters met up to the slider, as ``(name, "book:id")``."""
        limit = self.spoiler_limit(book_ids, upto) if book_ids else None
        out = []
        for b in book_ids:
            index = self.service.characters(b)
            for c in index.upto(limit) if index is not None else []:
                out.append((c.name if len(book_ids) == 1 else f"{c.name} ({b})", f"{b}:{c.id}"))
        return out

    def profile_choices(
        self, book_ids: list[str] | None, upto: float | None, current: str | None
    ) -> Any:
        """The dropdown for the selection and slider: the same character while still met."""
        choices, value = self._who(book_ids, upto, current)
        return gr.Dropdown(choices=choices, value=value)

    def _who(
        self, book_ids: Sequence[str] | None, upto: float | None, current: str | None
    ) -> tuple[list[tuple[str, str]], str | None]:
        choices = self.character_choices(list(book_ids or []), upto)
        values = [v for _, v in choices]
        return choices, current if current in values else (values[0] if values else None)

    def profile_markdown(
        self, book_ids: list[str] | None, upto: float | None, character: str | None
    ) -> str:
        """The chosen character's profile as of the slider (``render_profile``)."""
        book_ids = list(book_ids or [])
        if not book_ids:
            return "*Choose a book above.*"
        book_id, _, char_id = (character or "").partition(":")
        if book_id not in book_ids or not char_id:
            return "*Choose a character to see what the book has told of them so far.*"
        limit = self.spoiler_limit(book_ids, upto)
        return render_profile(self.service.character_profile(book_id, char_id, limit))

    def spoiler_limit(self, book_ids: Sequence[str], upto: float | None) -> int | None:
        """The slider at its right end (all chapters read) means no limit; a value that is no
        chapter number (NaN, infinity, text sent to the API) is a ``gr.Error``, one line."""
        n = _slider(upto)
        if n is None:
            return None
        return None if n >= self.max_chapter(book_ids) else n

    def select_books(self, book_ids: list[str] | None, upto: float | None, state: dict) -> Any:
        """New selection: the slider spans its chapters (still 'everything' if it was)."""
        book_ids = list(book_ids or [])
        top = self.max_chapter(book_ids) if book_ids else 1
        n = _slider(upto)
        was_all = n is None or n >= state.get("upto_max", 1)
        state = {**state, "upto_max": top}
        value = top if n is None or was_all else min(n, top)
        slider = gr.Slider(minimum=0, maximum=top, step=1, value=value)
        return slider, self.chapters_markdown(book_ids, value), state

    def refresh(self, state: dict) -> Any:
        """On page load: books another session uploaded are listed too."""
        choices = self.book_choices()
        first = [choices[0][1]] if choices else []
        top = self.max_chapter(first) if first else 1
        people, who = self._who(first, top, None)
        return (
            gr.CheckboxGroup(choices=choices, value=first),
            gr.Slider(minimum=0, maximum=top, step=1, value=top),
            self.chapters_markdown(first, top),
            self.characters_markdown(first, top),
            gr.Dropdown(choices=people, value=who),
            self.profile_markdown(first, top, who),
            {**state, "upto_max": top},
        )

    # -- chat ----------------------------------------------------------------------------
    def respond(
        self,
        message: str,
        chat: list[dict] | None,
        book_ids: list[str] | None,
        upto: float | None,
        state: dict,
    ) -> Iterator[tuple[Any, ...]]:
        """Stream one answer into the chat; sources fill their panel before the first token.

        Yields (textbox, chat, sources, answered-by line, state, answer JSON)."""
        chat = list(chat or [])
        question = " ".join((message or "").split())
        book_ids = list(book_ids or [])
        if not question:
            yield gr.skip(), chat, gr.skip(), "⚠ Type a question first.", state, gr.skip()
            return
        if len(question) > MAX_QUESTION_CHARS:
            line = f"⚠ The question is {len(question):,} characters; ask it in at most "
            yield gr.skip(), chat, gr.skip(), f"{line}{MAX_QUESTION_CHARS:,}.", state, gr.skip()
            return
        if not book_ids:
            yield (
                gr.skip(),
                chat,
                gr.skip(),
                "⚠ Choose a book in the library panel first.",
                state,
                gr.skip(),
            )
            return
        history = [Turn(**t) for t in state.get("turns", [])]
        limit = self.spoiler_limit(book_ids, upto)
        chat += [
            {"role": "user", "content": render_text(question)},
            {"role": "assistant", "content": "…"},
        ]
        yield "", chat, gr.skip(), "Searching the book …", state, gr.skip()
        try:
            stream, standalone = self.service.ask(
                question, book_ids, upto_chapter=limit, history=history
            )
        except ValueError as exc:  # a book gone from the library, an empty question
            chat[-1] = {"role": "assistant", "content": f"⚠ {render_text(str(exc))}"}
            yield "", chat, gr.skip(), f"⚠ {exc}", state, gr.skip()
            return
        preview = Answer(
            question=question,
            text="",
            sources=stream.sources,
            mode=stream.mode,
            answered_by=stream.answered_by,
            retrieval="",
            book_ids=book_ids,
            upto_chapter=limit,
        )
        sources_md = render_sources(preview)
        text = ""
        for piece in stream:
            text += piece
            chat[-1] = {"role": "assistant", "content": render_text(text)}
            yield "", chat, sources_md, "Answering …", state, gr.skip()
        answer = self.service.finished(stream, question, standalone)
        shown = answer.text
        if answer.error:
            note = f"⚠ {answer.error}."
            if answer.sources:
                note += " The passages it was given are listed under Sources."
            shown = f"{shown}\n\n{note}" if shown else note
        chat[-1] = {"role": "assistant", "content": render_text(shown)}
        if answer.sources:
            chat.append(
                {
                    "role": "assistant",
                    "content": render_citations(answer),
                    "metadata": {"title": f"Sources ({len(answer.sources)})", "status": "done"},
                }
            )
        turns = [*state.get("turns", []), {"question": question, "answer": answer.text}]
        state = {**state, "turns": turns}
        line = f"LLM: {self.service.llm_line()} · {limit_text(limit)}"
        if standalone != question:
            line += f" · searched for: “{_esc(standalone)}”"
        if answer.error:
            line = f"⚠ {_esc(answer.error)}  \n{line}"
        line += details(self.service.backends(book_ids, answer.retrieval))
        yield "", chat, render_sources(answer), line, state, answer.model_dump()

    def clear(self, state: dict) -> tuple[Any, ...]:
        return [], render_sources(None), "", {**state, "turns": []}, None

    # -- the API for `litrag ask` ---------------------------------------------------------
    def answer_api(
        self,
        question: str,
        books: list[str],
        upto_chapter: int | None = None,
        use_llm: bool = True,
        retrieval: str = "",
        top_k: int = 0,
    ) -> Iterator[str]:
        """One question, no history: JSON messages {"text"} while it streams, then
        {"text", "answer"} (the full cited answer); {"input_error"} for bad input, checked by
        the request model ``litrag ask`` uses (``AskRequest``: types, ranges, lengths).
        ``top_k`` 0 and ``retrieval`` "" mean the settings' own."""
        try:
            request = AskRequest.parse(
                question=question,
                books=books,
                upto_chapter=upto_chapter,
                use_llm=use_llm,
                retrieval=retrieval,
                top_k=None if type(top_k) is int and top_k == 0 else top_k,
            )
            chapters = [r.chapters for r in self.service.books() if r.book_id in request.books]
            request.check_chapters(max(chapters, default=None))
            stream, standalone = self.service.ask(
                request.question,
                request.books,
                upto_chapter=request.upto_chapter,
                use_llm=request.use_llm,
                retrieval=request.retrieval,
                top_k=request.top_k,
            )
            question = request.question
        except ValueError as exc:
            yield json.dumps({"input_error": str(exc)})
            return
        text = ""
        for piece in stream:
            text += piece
            yield json.dumps({"text": text})
        answer = self.service.finished(stream, question, standalone)
        yield json.dumps({"text": text, "answer": answer.model_dump()})

    # -- uploads ---------------------------------------------------------------------------
    def add_books(
        self,
        files: list[Any] | None,
        book_ids: list[str] | None,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
    ) -> Iterator[tuple[Any, ...]]:
        """Ingest uploaded .txt books, streaming the ingest's log; errors name the file."""
        paths = [f if isinstance(f, str) else getattr(f, "name", str(f)) for f in files or []]
        if not paths:
            yield "⚠ Choose one or more .txt files first.", gr.skip(), gr.skip()
            return
        events: queue.Queue[str | None] = queue.Queue()
        result: dict[str, Any] = {}

        def work() -> None:
            try:
                # Gradio's copies (under the system temp folder) go once the library has its own
                result["report"] = self.service.ingest(
                    paths, say=events.put, discard_under=Path(gradio_upload_folder())
                )
            except Exception as exc:  # a store or embedder failure: shown, never raised
                logger.exception("upload ingest failed")
                home = str(self.service.home)  # the browser sees no path of this server
                result["error"] = f"{type(exc).__name__}: {exc}".replace(home, "library")
            finally:
                events.put(None)

        threading.Thread(target=work, name="litrag-upload", daemon=True).start()
        log: list[str] = []
        progress(0.0, desc="starting")
        while (msg := events.get()) is not None:
            log.append(msg)
            m = _PROGRESS.match(msg)
            if m:
                i, n = int(m.group(1)), int(m.group(2))
                progress((i - 1) / n, desc=msg)
            yield "```\n" + "\n".join(log[-30:]) + "\n```", gr.skip(), gr.skip()
        lines = []
        if "error" in result:
            lines.append(f"✗ ingest failed: {result['error']}")
        report = result.get("report")
        if report is not None:
            lines += [f"✓ added **{b}**" for b in report.ingested]
            lines += [f"**{b}** was already in the library" for b in report.unchanged]
            lines += [f"✗ {_esc(reason)}" for _path, reason in report.failed]
        new = list(report.ingested) if report is not None else []
        selected = list(dict.fromkeys([*(book_ids or []), *new]))
        choices = self.book_choices()
        known = {v for _, v in choices}
        books = gr.CheckboxGroup(choices=choices, value=[b for b in selected if b in known])
        yield "\n\n".join(lines) or "nothing to do", books, None

    # -- layout ----------------------------------------------------------------------------
    def blocks(self) -> gr.Blocks:
        svc = self.service
        choices = self.book_choices()
        first = [choices[0][1]] if choices else []
        top = self.max_chapter(first) if first else 1
        with gr.Blocks(title="litrag: ask a book", analytics_enabled=False) as demo:
            state = gr.State({"turns": [], "upto_max": top})
            gr.Markdown(
                "## litrag · ask a book\n"
                "Answers cite the passages they come from; the slider keeps the chapters you "
                "have not read out of the search.",
                elem_id="header",
            )
            with gr.Row(equal_height=False):
                with gr.Column(scale=1, min_width=300):
                    gr.Markdown("### Library")
                    books = gr.CheckboxGroup(
                        choices=choices, value=first, label="Ask these books", elem_id="books"
                    )
                    upto = gr.Slider(
                        minimum=0,
                        maximum=top,
                        step=1,
                        value=top,
                        label="I have read up to chapter",
                        info="Nothing past it is searched (right end: the whole book).",
                        elem_id="upto",
                    )
                    with gr.Accordion("Chapters", open=False):
                        chapters = gr.Markdown(
                            self.chapters_markdown(first, top), elem_id="chapters"
                        )
                    with gr.Accordion("Characters", open=False):
                        people = gr.Markdown(
                            self.characters_markdown(first, top), elem_id="characters"
                        )
                        met, chosen = self._who(first, top, None)
                        who = gr.Dropdown(
                            choices=met,
                            value=chosen,
                            label="Profile of",
                            info="What the book has told of them up to the slider's chapter.",
                            elem_id="profile-of",
                            # our handler answers an unknown name ("Nobody of that name ..."):
                            # Gradio's own refusal lists every choice the page started with,
                            # characters met after the spoiler limit among them
                            allow_custom_value=True,
                        )
                        profile = gr.Markdown(
                            self.profile_markdown(first, top, chosen),
                            elem_id="character-profile",
                        )
                    with gr.Accordion("Add books (.txt)", open=False):
                        upload = gr.File(
                            label=f"Project Gutenberg .txt files (≤ {svc.settings.max_mb:g} MB)",
                            file_types=[".txt"],
                            file_count="multiple",
                            type="filepath",
                        )
                        add = gr.Button("Add to library")
                        upload_log = gr.Markdown(elem_id="upload-log")
                with gr.Column(scale=3, min_width=420):
                    chatbot = gr.Chatbot(
                        label="litrag",
                        height=440,
                        elem_id="chat",
                        placeholder="Ask a question about the selected book(s).",
                        feedback_options=None,
                        buttons=["copy"],
                    )
                    with gr.Row():
                        msg = gr.Textbox(
                            placeholder=f"e.g. {EXAMPLE_QUESTION}",
                            show_label=False,
                            scale=6,
                            elem_id="question",
                            autofocus=True,
                        )
                        ask = gr.Button("Ask", variant="primary", scale=1, elem_id="ask")
                        new = gr.Button("New chat", scale=1)
                    info = gr.Markdown(f"LLM: {svc.llm_line()}", elem_id="answered-by")
                    gr.Markdown("#### Sources")
                    sources = gr.Markdown(render_sources(None), elem_id="sources")
            last = gr.JSON(visible=False)

            gr.on(
                [msg.submit, ask.click],
                self.respond,
                inputs=[msg, chatbot, books, upto, state],
                outputs=[msg, chatbot, sources, info, state, last],
                api_name="chat",
            )

            def then_profile(event: Any) -> None:
                """After the character table: the dropdown of those met, then the profile."""
                event.then(
                    self.profile_choices,
                    inputs=[books, upto, who],
                    outputs=[who],
                    api_visibility="private",
                ).then(
                    self.profile_markdown,
                    inputs=[books, upto, who],
                    outputs=[profile],
                    api_visibility="private",
                )

            then_profile(
                books.change(
                    self.select_books,
                    inputs=[books, upto, state],
                    outputs=[upto, chapters, state],
                    api_name="select_books",
                ).then(
                    self.characters_markdown,
                    inputs=[books, upto],
                    outputs=[people],
                    api_visibility="private",
                )
            )
            then_profile(
                upto.release(
                    self.characters_markdown,
                    inputs=[books, upto],
                    outputs=[people],
                    api_name="characters",
                ).then(
                    self.chapters_markdown,
                    inputs=[books, upto],
                    outputs=[chapters],
                    api_name="chapters",
                )
            )
            who.input(
                self.profile_markdown,
                inputs=[books, upto, who],
                outputs=[profile],
                api_name="profile",
            )
            add.click(
                self.add_books,
                inputs=[upload, books],
                outputs=[upload_log, books, upload],
                api_name="add_books",
            )
            new.click(
                self.clear,
                inputs=[state],
                outputs=[chatbot, sources, info, state, last],
                api_visibility="private",
            )
            demo.load(
                self.refresh,
                inputs=[state],
                outputs=[books, upto, chapters, people, who, profile, state],
                api_visibility="private",
            )
            gr.api(self.answer_api, api_name="answer")
        demo.queue(default_concurrency_limit=16)
        return demo


def build_app(service: ChatService) -> gr.Blocks:
    return ChatApp(service).blocks()


def launch(
    demo: gr.Blocks,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    max_mb: float = 16.0,
    share: bool = False,
    quiet: bool = True,
    password: str | None = None,
    allowed_hosts: Iterable[str] = LOOPBACK_NAMES,
) -> str:
    """Start serving in background threads; returns the local URL. With ``password`` (the API
    key) the UI asks for it at a login page (any user name); a request whose Host is not one of
    ``allowed_hosts`` is refused (``litrag.app.hosts``: DNS rebinding)."""
    from starlette.middleware import Middleware
    from starlette.responses import PlainTextResponse

    def refused(line: str) -> PlainTextResponse:
        return PlainTextResponse(line + "\n", status_code=400)

    def login(_user: str, given: str) -> bool:
        return password is not None and hmac.compare_digest(given.encode(), password.encode())

    hosts = Middleware(HostCheck, allowed=frozenset(allowed_hosts), respond=refused)
    _, url, _ = demo.launch(
        server_name=host,
        server_port=port,
        share=share,
        prevent_thread_lock=True,
        quiet=quiet,
        max_file_size=f"{max_mb:g}mb",
        ssr_mode=False,
        show_error=True,
        theme=THEME,
        css=CSS,
        auth=login if password else None,
        app_kwargs={"middleware": [hosts]},
    )
    return str(url)
