"""Names checked against the book: the question's before the LLM, the answer's after it.

A small model's worst answer is a confident name the passages do not hold ("Who built the Lost
Cabin?" -> "John Thornton"; "Who is Sherlock Holmes's brother?" -> "Mycroft", a name The
Adventures never writes). Two checks catch what they can by construction, with no model:

- **the question names only people the book never mentions** (up to the reader's spoiler
  limit): the honest reply is that, said without calling the LLM ("Who is Professor Moriarty?"
  over The Adventures of Sherlock Holmes; "Who is Thornton?" with the limit at chapter 1). Of the
  483 questions of the public, frozen, blind and reader sets, it stops that one and no other;
- **the answer names someone no source names**: the draft is replaced by the plain "the passages
  do not say" reply, which keeps the closest passages and says which name was dropped.

What a name is comes from the book's own usage, not a model: a capitalised word that the book
(the blocks within the limit) never writes in lower case, or never writes at all, and that is no
function word. "According" or "However" start sentences but the book writes them in lower case
elsewhere; "Thornton" or "Mycroft" it never does. A name is supported when a source, the
question or the title holds it (any case), possessives and plurals folded, and a spelling one
or two letters away counts (readers write "Surrey" where Austen wrote "Surry").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from functools import lru_cache

# A word: letters of any script (François, Chamounix), inner apostrophes and hyphens kept.
_WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|['’-](?=[^\W\d_]))*")
# Never a name: words a question or an answer capitalises for grammar, titles and book words.
_NOT_NAMES = frozenset(
    """
    i i'm i'd i've i'll yes no not none also however according based sorry unfortunately
    therefore thus finally first then later chapter chapters book books passage passages
    reference references question answer narrator author story novel title part volume
    mr mrs miss ms dr sir lady lord madam professor captain colonel doctor saint st
    describe explain name list tell give summarise summarize compare
    """.split()
)


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from litrag.query.bm25 import stop_words

    return frozenset(stop_words())


def _fold(word: str) -> str:
    """Lower case, possessive and plural ``s`` off: "Holmes's" and "holmes" meet."""
    w = word.lower().replace("’", "'").strip("'-")
    for tail in ("'s", "s'", "'"):
        if w.endswith(tail):
            w = w[: -len(tail)]
    return w


@dataclass(frozen=True)
class BookWords:
    """The words of a book's blocks (within a spoiler limit): every word folded, and those the
    book writes in lower case (so not names)."""

    folded: frozenset[str]
    lowercase: frozenset[str]

    @classmethod
    def of(cls, texts: Iterable[str]) -> BookWords:
        folded: set[str] = set()
        lower: set[str] = set()
        for text in texts:
            for m in _WORD.finditer(text):
                w = m.group()
                f = _fold(w)
                folded.add(f)
                if w[0].islower():
                    lower.add(f)
        return cls(frozenset(folded), frozenset(lower))


def names_in(text: str, book: BookWords) -> list[str]:
    """The capitalised words of ``text`` that are names by ``book``'s usage, in order, once."""
    stop = _stopwords()
    seen: dict[str, str] = {}
    for m in _WORD.finditer(text):
        word = m.group()
        if not word[0].isupper():
            continue
        f = _fold(word)
        if len(f) < 2 or f in stop or f in _NOT_NAMES or f in book.lowercase:
            continue
        seen.setdefault(f, word.removesuffix("'s").removesuffix("’s"))
    return list(seen.values())


def _known(name: str, folded: frozenset[str] | set[str]) -> bool:
    """Whether ``folded`` holds ``name``, a plural of it ("the De Laceys"), or a spelling of it
    one or two letters away ("Charmounix" for Chamounix, "Surrey" for Austen's Surry)."""
    f = _fold(name)
    if f in folded or (f.endswith("s") and f[:-1] in folded):
        return True
    return bool(get_close_matches(f, [w for w in folded if w[:1] == f[:1]], n=1, cutoff=0.8))


def unknown_names(question: str, book: BookWords, title: str = "") -> list[str]:
    """The names of ``question`` when the book (within the limit) writes none of them.

    One known name is enough to leave the question to the LLM: readers add context the book does
    not spell ("at the Westons' on Christmas Eve", where Emma writes neither "Eve" nor "eve"), and
    only a question all of whose names are absent ("Who is Professor Moriarty?" of The
    Adventures) is one the book cannot answer. Title words and titles of address never count."""
    titled = {_fold(w) for w in _WORD.findall(title)}
    names = [n for n in names_in(question, book) if _fold(n) not in titled]
    if not names or any(_known(n, book.folded) for n in names):
        return []
    return names


def unsupported_names(
    answer: str, sources: Sequence[str], question: str, book: BookWords, title: str = ""
) -> list[str]:
    """Names in ``answer`` that neither a source, the question nor the title holds."""
    held: set[str] = {_fold(w) for t in (*sources, question, title) for w in _WORD.findall(t)}
    return [n for n in names_in(answer, book) if not _known(n, held)]


def never_mentioned_text(names: Sequence[str], title: str, upto_chapter: object) -> str:
    """The reply when the question names someone the book does not mention."""
    who = " or ".join(f"“{n}”" for n in names)
    if isinstance(upto_chapter, int):
        return (
            f"{title} never mentions {who} up to chapter {upto_chapter} (where you have read "
            "to), so the passages cannot answer this; the closest passages are below."
        )
    return (
        f"{title} never mentions {who}, so it cannot answer this; the closest passages are below."
    )


def dropped_note(names: Sequence[str]) -> str:
    """What the revised reply says of the draft it replaced."""
    who = ", ".join(f"“{n}”" for n in names)
    return f"(A draft answer named {who}, which none of these passages names, so it was withheld.)"


class NameGate:
    """How much of a draft a stream may send before the name check has read all of it.

    The check runs on the finished draft and may withdraw it for a name no source holds, but an
    HTTP stream cannot take back what it sent (the chat UI can replace its bubble). So a stream
    sends text only up to its last whole word, and stops for good at the first capitalised word
    that neither a source, the question nor the title holds: the check can flag no name before
    that point (it flags a subset of such words), so a withdrawn draft never had its name sent.
    """

    def __init__(self, held: Iterable[str]) -> None:
        self._held = {_fold(w) for t in held for w in _WORD.findall(t)}
        self._scanned = 0  # text before this offset was read and passed
        self.stopped_at: int | None = None

    def safe_end(self, text: str) -> int:
        """The length of ``text`` (the whole draft so far) that may be sent."""
        if self.stopped_at is not None:
            return self.stopped_at
        whole = len(text)
        words = list(_WORD.finditer(text, self._scanned))
        if words and not text[words[-1].end() :].strip("'’-"):
            whole = words.pop().start()  # the last word may still grow: "Thorn" + "ton", "Jean-"
        stop = _stopwords()
        for m in words:
            word = m.group()
            f = _fold(word)
            if not word[0].isupper() or len(f) < 2 or f in stop or f in _NOT_NAMES:
                continue
            if not _known(word, self._held):
                self.stopped_at = m.start()
                return m.start()
        self._scanned = whole
        return whole
