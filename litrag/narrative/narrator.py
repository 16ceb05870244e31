"""The names a first-person narrator is called by, and which of them are one person.

A first-person narrator is "I" and never names himself outside dialogue; the others call him by
name inside quoted speech ("My dear Victor, do not waste...", "My dear Frankenstein," exclaimed
he). Frankenstein's narrator is "Victor" to his family and "Frankenstein" to Clerval and the
creature, and the text never writes "Victor Frankenstein", so no alias rule links the two names.
So, offline, in one pass over each chapter's quote marks:

1. a chapter is narrated in the first person when "I/me/my/myself/mine" are dense in its text
   outside quotes (``FIRST_PERSON_PER_1000`` of the words there, in the book as a whole too).
   Measured on the six shared books: Frankenstein 74 and The Adventures of Sherlock Holmes 26
   per 1000, no chapter of theirs with narration under 17; Alice, Emma, Pride and Prejudice and
   The Call of the Wild 0.0 to 0.5, no chapter over 8. Frankenstein's creature tells chapters
   11-16 wholly inside quotes: those have no narration and do not count;
2. in such a chapter a character is a *narrator name* when it is named there only inside
   quotes, at least once spoken to ("dear Victor", "oh Victor", ", Victor," or "Victor!"; not
   "Justine, you may remember, was ...", the subject of a sentence);
3. two narrator names in ``MIN_SHARED_CHAPTERS`` chapters together are one person when one is a
   bare given name and the other a surname (written after a title or an initial somewhere:
   "Madame Frankenstein", "Dr. Watson"), and the narration never names both in one sentence
   (a family: "my father, Alphonse ..."). One shared chapter is not enough: a character can be
   spoken of only in dialogue in one chapter (Ernest, in Elizabeth's letter); two is the least
   that is not chance (Victor and Frankenstein share three).
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from litrag.narrative.aliases import NameForm

FIRST_PERSON_PER_1000 = 10.0  # "I/me/my/..." per 1000 words of narration (outside quotes)
MIN_NARRATION_WORDS = 100  # a chapter with less narration is not judged
MIN_SHARED_CHAPTERS = 2
MAX_SENTENCE_GAP = 400  # chars between two names for them to be checked as one sentence

NameKind = Literal["given", "surname", "both"]
K = TypeVar("K", bound=Hashable)  # what names a character for the caller (a group number)

_MARK = re.compile(r"\n[ \t\r]*\n|[“”\"‘’]")
_FIRST_PERSON = re.compile(r"\b(?:I|me|my|myself|mine)\b")
_WORD = re.compile(r"[A-Za-z]+")
_VOCATIVE_WORD = re.compile(r"\b(?:[Dd]ear|[Dd]earest|[Oo]h|O|[Aa]h)\s+$")
_COMMA_BEFORE = re.compile(r"(?:[,—]|--)\s*$")
_AFTER_VOCATIVE = re.compile(r"^\s*(?:[,!?;.—”\"’]|--)")
# Titles written before a surname, not a given name ("Sir Walter", "Miss Alice", "Lady Catherine").
_SURNAME_AFTER = re.compile(
    r"\b(?:(?:Mr|Mrs|Ms|Dr|Doctor|Captain|Colonel|Professor|Judge|Monsieur|Madame|Inspector|"
    r"Lieutenant|Major|General)\.?|[A-Z]\.)\s+([A-Z][a-z'-]+)"
)
_INNER_MARK = re.compile(r"[“”‘’']")
_SENTENCE_END = re.compile(r"(?<!\bMr)(?<!\bMrs)(?<!\bDr)(?<!\bSt)(?<!\b[A-Z])[.!?]\s|\n\s*\n")


def quote_spans(text: str) -> list[tuple[int, int]]:
    """``[(start, end)]`` of quoted text: from an opening mark to its closing mark or the end of
    the paragraph (a quote running over paragraphs reopens each one). Double quotes, curly or
    straight; single curly quotes (Alice) where no double quote is open, a ’ inside a word
    ("don’t", "Alice’s") being an apostrophe."""
    out: list[tuple[int, int]] = []
    open_at, kind = -1, ""
    for m in _MARK.finditer(text):
        c, i = m.group(), m.start()
        if c[0] == "\n":
            if open_at >= 0:
                out.append((open_at, i))
                open_at = -1
        elif open_at < 0:
            if c in '“"' or (c == "‘" and (i == 0 or not text[i - 1].isalnum())):
                open_at, kind = i, c
        elif (kind in '“"' and c in '”"') or (
            kind == "‘" and c == "’" and not text[i + 1 : i + 2].isalpha()
        ):
            out.append((open_at, i + 1))
            open_at = -1
    if open_at >= 0:
        out.append((open_at, len(text)))
    return out


def _narration(text: str, spans: Sequence[tuple[int, int]]) -> str:
    parts, prev = [], 0
    for s, e in spans:
        parts.append(text[prev:s])
        prev = e
    parts.append(text[prev:])
    return " ".join(parts)


def _quote_at(starts: list[int], spans: Sequence[tuple[int, int]], pos: int) -> int | None:
    """The start of the quote holding ``pos``, or None outside quotes."""
    k = bisect.bisect_right(starts, pos) - 1
    return spans[k][0] if k >= 0 and spans[k][0] <= pos < spans[k][1] else None


def is_vocative(text: str, start: int, end: int) -> bool:
    """The name at ``[start, end)`` is spoken to: "dear Victor", ", Victor,", "Victor!"."""
    before, after = text[max(0, start - 12) : start], text[end : end + 3]
    return bool(
        _VOCATIVE_WORD.search(before)
        or (_COMMA_BEFORE.search(before) and _AFTER_VOCATIVE.match(after))
        or after.startswith("!")
    )


def _in_inner_quote(text: str, start: int, pos: int) -> bool:
    """``pos`` lies in a quote inside the quote opened at ``start``: a speaker quoting someone
    ("'I wish you, John,' said my uncle", told to Holmes), who does not speak to the narrator.
    Single quotes inside double ones (a straight ' opens after a space and closes before one:
    not "don't"), double inside single."""
    inner_double = text[start] == "‘"
    open_ = False
    for m in _INNER_MARK.finditer(text, start + 1, pos):
        c, i = m.group(), m.start()
        if inner_double:
            open_ = c == "“" if c in "“”" else open_
        elif not open_ and c in "‘'" and not text[i - 1].isalnum():
            open_ = True
        elif open_ and c in "’'" and not text[i + 1 : i + 2].isalpha():
            open_ = False
    return open_


@dataclass(frozen=True)
class NarratorMerge(Generic[K]):
    """Two characters found to be one narrator: the chapters where both are narrator names."""

    given: K
    surname: K
    chapters: tuple[int, ...]


def first_person_chapters(chapters: Sequence[tuple[int, str]]) -> dict[int, list[tuple[int, int]]]:
    """The first-person chapters of a first-person book, with their quote spans ({} for a book
    narrated in the third person)."""
    spans = {ch: quote_spans(text) for ch, text in chapters}
    density: dict[int, tuple[int, int]] = {}
    for ch, text in chapters:
        narration = _narration(text, spans[ch])
        density[ch] = (len(_FIRST_PERSON.findall(narration)), len(_WORD.findall(narration)))
    first = sum(f for f, _ in density.values())
    words = sum(w for _, w in density.values())
    if not words or first * 1000 / words < FIRST_PERSON_PER_1000:
        return {}
    return {
        ch: spans[ch]
        for ch, (f, w) in density.items()
        if w >= MIN_NARRATION_WORDS and f * 1000 / w >= FIRST_PERSON_PER_1000
    }


def narrator_names(
    chapters: Sequence[tuple[int, str]],
    mentions: Mapping[K, Sequence[tuple[int, int, int]]],
    first_person: Mapping[int, Sequence[tuple[int, int]]],
) -> dict[K, set[int]]:
    """For each character (``mentions``: key -> ``[(chapter, start, end)]``), the first-person
    chapters where it is a narrator name: named only inside quotes, once at least spoken to (by
    the speaker, not by someone the speaker quotes)."""
    texts = dict(chapters)
    starts = {ch: [s for s, _ in sp] for ch, sp in first_person.items()}
    out: dict[K, set[int]] = defaultdict(set)
    for key, items in mentions.items():
        by_chapter: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for ch, s, e in items:
            if ch in first_person:
                by_chapter[ch].append((s, e))
        for ch, found in by_chapter.items():
            sp, st, text = first_person[ch], starts[ch], texts[ch]
            quote = [_quote_at(st, sp, s) for s, _ in found]
            if all(q is not None for q in quote) and any(
                is_vocative(text, s, e) and not _in_inner_quote(text, q, s)
                for (s, e), q in zip(found, quote, strict=True)
                if q is not None
            ):
                out[key].add(ch)
    return dict(out)


def named_together(
    chapters: Mapping[int, str],
    spans: Mapping[int, list[tuple[int, int]]],
    a: Sequence[tuple[int, int, int]],
    b: Sequence[tuple[int, int, int]],
) -> bool:
    """Some mention of ``a`` and one of ``b`` lie in one sentence of the narration (outside
    quotes, no quote between them)."""
    starts = {ch: [s for s, _ in sp] for ch, sp in spans.items()}

    def outside(items: Sequence[tuple[int, int, int]]) -> dict[int, list[tuple[int, int]]]:
        out: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for ch, s, e in items:
            if _quote_at(starts[ch], spans[ch], s) is None:
                out[ch].append((s, e))
        return out

    oa, ob = outside(a), outside(b)
    for ch in oa.keys() & ob.keys():
        text = chapters[ch]
        for sa, ea in oa[ch]:
            for sb, eb in ob[ch]:
                lo, hi = (ea, sb) if ea <= sb else (eb, sa)
                if hi - lo > MAX_SENTENCE_GAP or hi < lo:
                    continue
                gap = text[lo:hi]
                if not _SENTENCE_END.search(gap) and not re.search(r"[“”\"]", gap):
                    return True
    return False


def narrator_merges(
    chapters: Sequence[tuple[int, str]],
    mentions: Mapping[K, Sequence[tuple[int, int, int]]],
    kind_of: Callable[[K], NameKind | None],
) -> list[NarratorMerge[K]]:
    """The pairs of characters that are one first-person narrator (rules in the module
    docstring); ``kind_of`` says whether a character is a bare given name or a surname.
    Each character is merged once at most: the pair sharing most chapters first."""
    first_person = first_person_chapters(chapters)
    if not first_person:
        return []
    names = narrator_names(chapters, mentions, first_person)
    kinds = {k: kind_of(k) for k, chs in names.items() if len(chs) >= MIN_SHARED_CHAPTERS}
    givens = [k for k, kind in kinds.items() if kind == "given"]
    surnames = [k for k, kind in kinds.items() if kind == "surname"]
    pairs = sorted(
        (
            (len(shared), g, s, tuple(sorted(shared)))
            for g in givens
            for s in surnames
            if len(shared := names[g] & names[s]) >= MIN_SHARED_CHAPTERS
        ),
        key=lambda p: (-p[0], p[3]),
    )
    if not pairs:
        return []
    texts = dict(chapters)
    spans = {ch: quote_spans(text) for ch, text in chapters}
    merged: set[K] = set()
    out: list[NarratorMerge[K]] = []
    for _, g, s, shared in pairs:
        if g in merged or s in merged:
            continue
        if named_together(texts, spans, mentions[g], mentions[s]):
            continue
        merged |= {g, s}
        out.append(NarratorMerge(given=g, surname=s, chapters=shared))
    return out


def written_surnames(texts: Sequence[str]) -> set[str]:
    """Names written after a title that goes with a surname, or after an initial ("Madame
    Frankenstein", "M. Frankenstein", "Dr. Watson")."""
    return {m.group(1) for text in texts for m in _SURNAME_AFTER.finditer(text)}


def name_kind(forms: Sequence[NameForm], surnames: set[str]) -> NameKind | None:
    """What a character's name forms name: a full name ("both"), only a surname (each is in
    ``surnames`` or titled "Mr."/"Mrs."), only a given name (none is), or a mix (None)."""
    if any(f.full for f in forms):
        return "both"
    is_surname = [f.surname in surnames or f.title in ("mr", "mrs") for f in forms]
    if all(is_surname):
        return "surname"
    if not any(is_surname):
        return "given"
    return None
