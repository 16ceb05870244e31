"""Is the name an answer gives tied, in the passages, to what the question asks about?

The name check (``query.name_check``) withdraws a name that no source holds. What it cannot see
is a name the sources do hold, given as the answer to a question they do not answer: "What was
the name of Judge Miller's wife?" -> "Mollie" (one of his daughters: the book never names a
wife), "What is the name of Watson's wife?" -> "Mrs. Hudson", "Who built the Lost Cabin?" ->
"John Thornton". A small model picks the nearest name on the page.

The test here needs no model: a name that answers the question is written, somewhere in the
passages the model read, in the same sentence (or the next one, where a pronoun carries it) as
two of the words the question asks about (its content words and its names, stemmed as BM25
stems them: "wife", "sweater", "Judge", "Lost Cabin"; not "name", "happened" or the book's
title). "His father, Elmo, a huge St. Bernard, had been the Judge's inseparable companion, and
Buck bid fair to follow in the way of his father" ties Elmo to "Buck's father"; "the memorable
night of Manuel's treachery. No one saw him and Buck go off" (with "The Judge was at a meeting"
in the same sentence) ties Manuel to "Who stole Buck from Judge Miller's place?". Only names
the answer adds count (one the question already says is no answer to it); an answer with no
such name is left alone. A draft is withdrawn when none of its new names is tied: one tied name
is enough, since a right answer may add a second name in passing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from litrag.query.name_check import BookWords, _fold, names_in

# Words of the question a sentence pair must hold to tie its names to it (all, for a shorter
# question). One is too few: the question's own anchor ("Judge" of "Judge Miller's wife") is on
# every page of its scenes, beside every name there ("Mollie and Alice, the Judge's daughters").
TIE_WORDS = 2

# Question words that say what kind of answer is wanted, not what it is about.
_ASKING = frozenset(
    """
    name named names call called happen happened happens mean means meaning book story novel
    chapter chapters first kind sort type
    """.split()
)


def _stems(text: str) -> set[str]:
    from litrag.query.bm25 import tokenize

    return set(tokenize(text))


def question_terms(question: str, title: str = "") -> list[frozenset[str]]:
    """What ``question`` asks about, as groups of stems: each content word alone, and each run
    of capitalised words as one ("Judge Miller's" is one person, not two words of the question);
    less the words that only say what kind of answer is wanted and the words of the title."""
    from litrag.query.name_check import _NOT_NAMES, _WORD, _stopwords

    drop = _stems(" ".join(_ASKING)) | _stems(title)
    stop = _stopwords()
    groups: list[set[str]] = []
    run: set[str] | None = None  # the capitalised run being read
    for m in _WORD.finditer(question):
        word = m.group()
        stems = _stems(word) - drop
        capital = word[0].isupper() and _fold(word) not in stop and _fold(word) not in _NOT_NAMES
        if capital and run is not None:
            run |= stems
            continue
        run = None
        if not stems:
            continue
        if capital:
            run = set(stems)
            groups.append(run)
        else:
            groups.append(set(stems))
    unique = list(dict.fromkeys(frozenset(g) for g in groups if g))
    return unique


def _sentence_pairs(sources: Iterable[str]) -> list[str]:
    """Each sentence of each source joined to the next one (a pronoun's reach)."""
    from litrag.segment.sentences import split_sentences

    pairs: list[str] = []
    for text in sources:
        sentences = [s.text for s in split_sentences(text)]
        pairs += [" ".join(sentences[i : i + 2]) for i in range(len(sentences))]
    return pairs


def tied_names(question: str, sources: Sequence[str], book: BookWords, title: str = "") -> set[str]:
    """The names (folded) of ``sources`` written next to a word the question asks about."""
    terms = question_terms(question, title)
    tied: set[str] = set()
    if not terms:
        return tied
    need = min(TIE_WORDS, len(terms))
    for pair in _sentence_pairs(sources):
        stems = _stems(pair)
        if sum(1 for group in terms if group & stems) >= need:
            tied.update(_fold(n) for n in names_in(pair, book))
    return tied


# A question whose answer is a name: only there is a name in the answer the answer itself
# ("Why did Manuel sell Buck?" -> "... he loved to play Chinese lottery" names in passing).
_ASKS_A_NAME = re.compile(r"\b(?:who|whom|whose)\b|\bnamed?\b|\bcalled\b", re.I)


def asks_for_a_name(question: str) -> bool:
    """Whether ``question`` wants a name for its answer (who / whom / whose / what name)."""
    return bool(_ASKS_A_NAME.search(question))


def untied_names(
    answer: str, question: str, sources: Sequence[str], book: BookWords, title: str = ""
) -> list[str]:
    """The names ``answer`` adds (not in the question or the title) when none of them is tied
    to the question in ``sources``; [] when one is, or when it adds none.

    Names no source holds are the name check's (``unsupported_names``), not counted here; a
    question that does not ask for a name is left alone (``asks_for_a_name``)."""
    if not asks_for_a_name(question):
        return []
    asked = {_fold(n) for n in names_in(f"{question} {title}", book)}
    held = {_fold(w) for t in sources for w in names_in(t, book)}
    new = [n for n in names_in(answer, book) if _fold(n) not in asked and _fold(n) in held]
    if not new:
        return []
    tied = tied_names(question, sources, book, title)
    return [] if any(_fold(n) in tied for n in new) else new


def untied_note(names: Sequence[str]) -> str:
    """What the revised reply says of a draft whose names are not tied to the question."""
    who = ", ".join(f"“{n}”" for n in names)
    return (
        f"(A draft answer said {who}, but no passage ties that name to what the question asks "
        "about, so it was withheld.)"
    )
