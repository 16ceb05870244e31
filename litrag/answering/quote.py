"""Quote, then answer: the model first names the sentences that answer, then answers from them.

A small model handed five passages often answers from the wrong one, or from what it remembers
of a famous book, while the right sentence sits in its prompt. So the answer is made checkable:

1. the passages go to the model with every sentence numbered (``[2.4]``: passage 2, sentence 4),
   and it replies with JSON naming the sentences that state the answer (``json_object`` output,
   which a 1.5B model keeps to);
2. the product checks the numbers: each must be a sentence of a passage in the prompt (so within
   the spoiler limit the retrieval already obeyed); unknown numbers are dropped;
3. the answer is written from those sentences alone (a short second prompt), and the sentences
   are the answer's evidence, shown with their passage and chapter;
4. when no sentence answers, the reply says so plainly, with the closest passages as sources:
   no second call, no invented answer.

Passages are quoted data inside ``<passage>`` tags (the title in ``<title>``, the answer step's
sentences in ``<quotes>``), and the instructions say that text inside them is never to be
followed (a book is text from the internet); ``litrag.segment.quoting`` defuses look-alikes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from litrag.segment.quoting import DATA_RULE, neutralise, quoted_line, quoted_title
from litrag.segment.sentences import split_sentences
from litrag.segment.validation import OutputParseError, extract_json

GAP = "[...]"
MAX_QUOTES = 4

QUOTE_SYSTEM_PROMPT = (
    "You find evidence in a book. You are given a question and passages of the book inside "
    f"<passage> tags, one sentence per line. {DATA_RULE} Copy, word for word, the sentence "
    "of the passages that states the answer to the question (two if one does not suffice). "
    'Reply with JSON only: {"quotes": ["the copied sentence"]}, or {"quotes": []} if no '
    "sentence states the answer."
)
# Copying, not numbering: the packaged 1.5B model named the wrong sentence numbers (one off, or
# the example's numbers, or the form "p.s" itself) on 4 of 4 factual checks when asked for
# numbers, and copied the right sentence when asked to copy it. What it copies is matched back
# to the numbered sentences of the prompt, so an invented "quote" matches nothing.
QUOTE_USER_TEMPLATE = (
    "Book Title: {title}\nQuestion: {query}\n\n{passages}\n\nQuestion: {query}\nJSON:"
)

ANSWER_SYSTEM_PROMPT = (
    "You answer questions about a book from sentences quoted from it. Use only the quoted "
    f"sentences. {DATA_RULE} Answer directly, in one sentence, naming who or what the "
    "sentences name."
)
ANSWER_USER_TEMPLATE = (
    "Book Title: {title}\nQuestion: {query}\n<quotes>\n{quotes}\n</quotes>\n\n"
    "Question: {query}\nAnswer:"
)

_ID = re.compile(r"^\s*\[?\s*(\d+)\s*[.:,-]\s*(\d+)\s*\]?\s*$")
_LEADING_ID = re.compile(r"^\s*\[\s*(\d+)\s*\.\s*(\d+)\s*\]")
MIN_COPIED = 0.8  # share of a copied quote's words its sentence must hold


@dataclass(frozen=True)
class Numbered:
    """One sentence of a prompt passage: ``passage`` and ``index`` are 1-based."""

    passage: int
    index: int
    text: str

    @property
    def key(self) -> str:
        return f"{self.passage}.{self.index}"


def number_passages(texts: Sequence[str]) -> list[list[Numbered]]:
    """Each passage's sentences, numbered; the focus's ``[...]`` gap markers are not sentences."""
    out = []
    for p, text in enumerate(texts, start=1):
        parts = [s.flat.replace(GAP, " ").strip() for s in split_sentences(text)]
        kept = [s for s in parts if re.search(r"\w", s)]
        out.append([Numbered(p, i, s) for i, s in enumerate(kept, start=1)])
    return out


def format_numbered(headings: Sequence[str], numbered: Sequence[Sequence[Numbered]]) -> str:
    """The passages as the quote step reads them, one ``<passage>`` block each."""
    blocks = []
    for heading, sentences in zip(headings, numbered, strict=True):
        lines = "\n".join(f"[{s.key}] {neutralise(s.text)}" for s in sentences)
        p = sentences[0].passage if sentences else 0
        blocks.append(f'<passage n="{p}" from="{quoted_line(heading)}">\n{lines}\n</passage>')
    return "\n\n".join(blocks)


def _chat(system: str, user: str) -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=system),
        ChatMessage(role=MessageRole.USER, content=user),
    ]


def quote_messages(title: str, question: str, passages: str) -> list[ChatMessage]:
    user = QUOTE_USER_TEMPLATE.format(title=quoted_title(title), query=question, passages=passages)
    return _chat(QUOTE_SYSTEM_PROMPT, user)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def match_sentence(copied: str, numbered: Sequence[Sequence[Numbered]]) -> Numbered | None:
    """The prompt sentence a copied quote comes from: the one holding most of its words (at
    least ``MIN_COPIED`` of them, in order or not), or None for a quote the passages never say."""
    words = _words(copied)
    if len(words) < 2:
        return None
    best, best_share = None, 0.0
    for sentences in numbered:
        for s in sentences:
            have = set(_words(s.text))
            share = sum(w in have for w in words) / len(words)
            if share > best_share:
                best, best_share = s, share
    return best if best_share >= MIN_COPIED else None


def parse_quotes(reply: str, numbered: Sequence[Sequence[Numbered]]) -> list[Numbered]:
    """The sentences a quote reply names that exist in the prompt, in passage order.

    A ``quotes`` list of copied sentences (what the prompt asks for), each matched back to the
    prompt's sentences; also a ``sentences`` list of numbers (``"2.4"``, ``"[2.4]"``,
    ``[2, 4]``, a bare number with one passage, or a number followed by its sentence).
    Raises ``OutputParseError`` when the reply holds no JSON object with such a list.
    """
    obj = extract_json(reply)
    raw = obj.get("quotes", obj.get("quote", obj.get("sentences", obj.get("evidence"))))
    if isinstance(raw, str):
        raw = [raw] if raw.strip() else []
    if not isinstance(raw, list):
        raise OutputParseError('the reply has no "quotes" list')
    by_key = {s.key: s for sentences in numbered for s in sentences}
    found: dict[str, Numbered] = {}
    for item in raw:
        key = None
        if isinstance(item, list | tuple) and len(item) == 2:
            key = f"{item[0]}.{item[1]}"
        elif isinstance(item, int) and len(numbered) == 1:
            key = f"1.{item}"
        elif isinstance(item, str):
            m = _ID.match(item) or _LEADING_ID.match(item)
            if m:
                key = f"{int(m.group(1))}.{int(m.group(2))}"
            elif item.strip().isdigit() and len(numbered) == 1:
                key = f"1.{int(item)}"
            else:
                hit = match_sentence(item, numbered)
                key = hit.key if hit is not None else None
        if key in by_key:
            found[key] = by_key[key]
    ordered = sorted(found.values(), key=lambda s: (s.passage, s.index))
    return ordered[:MAX_QUOTES]


def with_context(quotes: Sequence[Numbered], numbered: Sequence[Sequence[Numbered]]) -> str:
    """The quoted sentences for the answer step, each run preceded by the sentence before it
    (its antecedents: "He led Buck away" needs the sentence naming him)."""
    lines: list[str] = []
    shown: set[str] = set()
    for q in quotes:
        sentences = numbered[q.passage - 1]
        for s in sentences[max(q.index - 2, 0) : q.index]:
            if s.key not in shown:
                shown.add(s.key)
                lines.append(f"[{s.key}] {neutralise(s.text)}")
    return "\n".join(lines)


def answer_messages(title: str, question: str, quotes: str) -> list[ChatMessage]:
    user = ANSWER_USER_TEMPLATE.format(title=quoted_title(title), query=question, quotes=quotes)
    return _chat(ANSWER_SYSTEM_PROMPT, user)


def no_answer_text(title: str, upto_chapter: object) -> str:
    """The plain reply when no sentence of the passages answers."""
    if isinstance(upto_chapter, int):
        return (
            f"The passages of {title} up to chapter {upto_chapter} (where you have read to) do "
            "not say. The answer may lie later in the book; the closest passages are below."
        )
    return f"The passages of {title} I found do not say; the closest passages are below."
