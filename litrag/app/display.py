"""What a reader is shown of a block: a phrase from the book instead of a list of keywords.

The offline segmenter's subtitles ("Miller, Arctic: cool, house, strong") are built for search:
they reach the embedding and BM25 views, and retrieval is measured with them. Shown to a reader
they read as noise, so the chat, the API's citations and ``litrag ask`` show the block's most
telling sentence instead, cut to a phrase: the sentence holding most of the subtitle's names and
words, and of it the stretch that holds them. Display only: what is stored and searched stays
the subtitle. A subtitle that already reads as a phrase (an LLM segmenter's) is shown as it is.
"""

from __future__ import annotations

import re

from litrag.answering.answer_types import Source
from litrag.segment.sentences import split_sentences

PHRASE_WORDS = 10
# The offline segmenter's shape: "Name, Name: word, word, word", or either half alone.
_TERM = r"[A-Za-z][\w'\u2019-]*"
_LIST = rf"{_TERM}(?:, {_TERM})*"
_KEYWORDS = re.compile(rf"^(?:{_LIST}: {_LIST}|{_LIST})$")
_WORD = re.compile(r"[\w'\u2019-]+")
_QUOTES = re.compile(r"[\"\u201c\u201d]")  # dialogue marks; apostrophes stay
_CLAUSE = re.compile(r"(?<=[,;:\u2014\u2013])\s*")
_EDGE = "\"'\u201c\u201d\u2018\u2019()[]-\u2014\u2013 ,;:."


def is_keyword_subtitle(subtitle: str) -> bool:
    """Whether ``subtitle`` is a list of names and words (the offline segmenter's), not a phrase.
    A single word counts as a list: it says nothing a phrase would not say better."""
    return bool(_KEYWORDS.match(subtitle.strip()))


def _terms(subtitle: str) -> dict[str, int]:
    """The subtitle's terms, lower case, names weighing two and words one."""
    names, _, words = subtitle.rpartition(": ")
    if not names and words[:1].isupper():  # names only
        names, words = words, ""
    weights = {t.lower(): 2 for t in _WORD.findall(names)}
    for t in _WORD.findall(words):
        weights.setdefault(t.lower(), 1)
    return weights


def _hits(words: list[str], terms: dict[str, int]) -> int:
    seen = {w.lower().removesuffix("'s").removesuffix("\u2019s") for w in words}
    return sum(weight for term, weight in terms.items() if term in seen)


def _phrase(sentence: str, terms: dict[str, int], max_words: int) -> str:
    """``sentence`` cut to at most ``max_words`` words: the run of whole clauses (cut at commas,
    semicolons, colons and dashes) holding most terms, the longest and then the earliest on a
    tie; where a clause is too long for that, its best stretch, an ellipsis marking the cut."""
    sentence = _QUOTES.sub("", sentence)
    words = sentence.split()
    if len(words) <= max_words:
        return " ".join(words).strip(_EDGE)

    def hits(run: list[str]) -> int:
        return _hits([w.strip(_EDGE) for w in run], terms)

    top, start = max((hits(words[i : i + max_words]), -i) for i in range(len(words) - max_words))
    clauses = [c.split() for c in _CLAUSE.split(sentence) if c.strip()]
    best: tuple[int, int, int] | None = None
    chosen: list[str] = []
    for i in range(len(clauses)):
        run: list[str] = []
        for clause in clauses[i:]:
            run = run + clause
            if len(run) > max_words:
                break
            if len(run) >= 4:
                key = (hits(run), len(run), -i)
                if best is None or key > best:
                    best, chosen = key, run
    if best is not None and best[0] >= top:
        return " ".join(chosen).strip(_EDGE)
    return " ".join(words[-start : -start + max_words]).strip(_EDGE) + " …"


def display_subtitle(subtitle: str, text: str, max_words: int = PHRASE_WORDS) -> str:
    """The subtitle a reader sees of a block whose text is ``text``: its most telling sentence,
    cut to a phrase, for a keyword subtitle; any other subtitle as it is."""
    subtitle = " ".join(subtitle.split())
    if subtitle and not is_keyword_subtitle(subtitle):
        return subtitle
    terms = _terms(subtitle)
    best: tuple[int, int, int] | None = None
    chosen = ""
    for i, sentence in enumerate(split_sentences(text)):
        flat = " ".join(sentence.flat.split())
        words = [w.strip(_EDGE) for w in flat.split()]
        if len(words) < 6:  # "Yes," said he. / a letter's date line
            continue
        # most terms; then a sentence near a phrase's length; then the earliest
        key = (_hits(words, terms), -abs(len(words) - 2 * max_words) // 10, -i)
        if best is None or key > best:
            best, chosen = key, flat
    if not chosen:
        return subtitle
    phrase = _phrase(chosen, terms, max_words)
    return phrase[:1].upper() + phrase[1:] if phrase else subtitle


def shown_subtitle(src: Source) -> str:
    """``display_subtitle`` of a cited source."""
    return display_subtitle(src.subtitle, src.text)
