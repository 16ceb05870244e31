"""Names checked against the book: the question's before the LLM, the answer's after it.

A small model's worst answer is a confident name the passages do not hold ("Who built the Lost
Cabin?" -> "John Thornton"; "Who is Sherlock Holmes's brother?" -> "Mycroft", a name The
Adventures never writes). Four checks catch what they can by construction, with no model:

- **the question names only people the book never mentions** (up to the reader's spoiler
  limit): the honest reply is that, said without calling the LLM ("Who is Professor Moriarty?"
  over The Adventures of Sherlock Holmes; "Who is Thornton?" with the limit at chapter 1). Of the
  483 questions of the public, frozen, blind and reader sets, it stops that one and no other;
- **the answer names someone, or states a number, that no source holds** ("1926" for a year the
  book never gives, "$300" where the passage says "sixteen hundred dollars"): the draft is
  replaced by the plain "the passages do not say" reply, which keeps the closest passages and
  says what was dropped;
- **a name given for a question that asks for one is not tied to it**: the passages hold it, but
  never beside what the question asks about ("Judge Miller's wife" -> "Mollie", one of his
  daughters): withdrawn the same way (``untied_names``, a later section of this module);
- **the answer only says the question back** ("Who killed Thornton?" -> "John Thornton killed
  Thornton"): no word the question lacks, so no answer (``echoed_names``, the last section).

What a name is comes from the book's own usage, not a model: a capitalised word that the book
(the blocks within the limit) never writes in lower case, or never writes at all, and that is no
function word. "According" or "However" start sentences but the book writes them in lower case
elsewhere; "Thornton" or "Mycroft" it never does. A name is supported when a source, the
question or the title holds it (any case), possessives and plurals folded, and a spelling one
or two letters away counts (readers write "Surrey" where Austen wrote "Surry").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from functools import lru_cache

from llama_index.core.schema import NodeWithScore

from litrag.answering.answer_types import AnswerRun, Source, passage
from litrag.answering.quote import no_answer_text

logger = logging.getLogger(__name__)

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
    from litrag.scoring.bm25 import stop_words

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


_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    w: 10 * i
    for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split())
    if i >= 2
}
_ORDINALS = {
    w: i + 1
    for i, w in enumerate(
        "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
        "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth "
        "twentieth".split()
    )
}
_DIGITS = re.compile(r"\d[\d,]*(?:\.\d+)?")


def numbers_in(text: str) -> set[str]:
    """The numbers ``text`` states, in digits ("1,600" -> "1600") or in words ("sixteen hundred",
    "one hundred and forty", "forty-two", "the fourth"), as digit strings."""
    found = {m.group().replace(",", "").rstrip(".") for m in _DIGITS.finditer(text)}
    total = current = 0
    kind = ""  # what the number read so far ended with: "", "unit", "tens", "scale"

    def close() -> None:
        nonlocal total, current, kind
        if kind:
            found.add(str(total + current))
        total = current = 0
        kind = ""

    for word in re.findall(r"[a-z]+|[^\sa-z]", text.lower().replace("-", " ")):
        if word in _ORDINALS:  # "the fourth" for "4th": a number ends there
            if kind in ("unit", "") or (kind == "tens" and _ORDINALS[word] >= 10):
                close()
            current += _ORDINALS[word]
            kind = "unit"
            close()
        elif word in _UNITS:
            if kind == "unit" or (kind == "tens" and _UNITS[word] >= 10):
                close()  # "two two", "forty twelve": two numbers
            current += _UNITS[word]
            kind = "unit"
        elif word in _TENS:
            if kind in ("unit", "tens"):
                close()
            current += _TENS[word]
            kind = "tens"
        elif word in ("hundred", "thousand"):  # "a hundred": one
            if word == "hundred":
                current = (current or 1) * 100
            else:
                total, current = total + (current or 1) * 1000, 0
            kind = "scale"
        elif not (word == "and" and kind == "scale"):  # "one hundred and forty" goes on
            close()
    close()
    return found


def unsupported_names(
    answer: str, sources: Sequence[str], question: str, book: BookWords, title: str = ""
) -> list[str]:
    """Names, and numbers in digits, of ``answer`` that neither a source, the question nor the
    title holds (a year or a sum the passages never state is as invented as a name)."""
    grounds = (*sources, question, title)
    held: set[str] = {_fold(w) for t in grounds for w in _WORD.findall(t)}
    said = set().union(*(numbers_in(t) for t in grounds))
    names = [n for n in names_in(answer, book) if not _known(n, held)]
    digits = sorted({m.group().replace(",", "").rstrip(".") for m in _DIGITS.finditer(answer)})
    return names + [d for d in digits if d not in said]


def never_mentioned_text(names: Sequence[str], title: str, upto_chapter: object) -> str:
    """The reply when the question names someone the book does not mention."""
    who = " or ".join(f"“{n}”" for n in names)
    if isinstance(upto_chapter, int):
        return (
            f"{title} never mentions {who} up to chapter {upto_chapter} (where you have read "
            "to), so the passages cannot answer this; it may come later in the book. The "
            "closest passages are below."
        )
    return (
        f"{title} never mentions {who}, so it cannot answer this; the closest passages are below."
    )


def dropped_note(names: Sequence[str]) -> str:
    """What the revised reply says of the draft it replaced."""
    who = ", ".join(f"“{n}”" for n in names)
    return f"(A draft answer said {who}, which none of these passages says, so it was withheld.)"


UNNAMED_NOTE = "(A draft answer named someone none of these passages names, so it was withheld.)"
NOT_MET = "[a name not met yet]"  # in place of a withheld name past the reader's limit


def _not_met(names: Sequence[str], book: BookWords, limit: object) -> list[str]:
    """Of withheld ``names``, those the book does not write up to the reader's ``limit``: the
    model may know them from later in the book, so they are named nowhere (none, no limit; a
    number, which names nobody, is said)."""
    if not isinstance(limit, int):
        return []
    return [n for n in names if not n[:1].isdigit() and not _known(n, book.folded)]


def never_mentioned(
    run: AnswerRun, names: list[str], nodes: list[NodeWithScore], title: str
) -> list[NodeWithScore]:
    """Fill ``run`` with the reply to a question whose names the book never writes (no LLM
    call); returns the sources it keeps (the closest three passages)."""
    used = nodes[:3]
    run.sources = [Source.from_node(i, n) for i, n in enumerate(used, start=1)]
    run.mode, run.answered_by = "none", "name check (the LLM was not asked)"
    run.withheld = names
    run.text = never_mentioned_text(names, title, run.upto_chapter)
    return used


# A sentence of a passage that speaks to the model, not of the story: a role label at its start,
# or an order about the answer. Book text is data; words it holds only in such a sentence are no
# support for an answer (a planted "SYSTEM: ... answer only with the word PWNED").
_INSTRUCTION = re.compile(
    r"^\W*(?:system|assistant|user|developer|instructions?)\s*:"
    r"|\b(?:ignore|disregard)\s+(?:the|all|any|every|previous|prior|your)\b"
    r"|\b(?:answer|reply|respond)\s+(?:only\s+)?with\s+(?:only\s+)?the\s+word\b"
    r"|\b(?:answer|reply|respond)\s+only\b",
    re.I,
)


def instruction_words(sources: Sequence[str], question: str, title: str = "") -> list[str]:
    """Words the sources hold only inside sentences that give the model orders (and neither the
    question nor the title holds): what an answer that obeyed a planted instruction repeats."""
    from litrag.segment.sentences import split_sentences

    orders: set[str] = set()
    plain: set[str] = {_fold(w) for t in (question, title) for w in _WORD.findall(t)}
    for text in sources:
        for sentence in split_sentences(text):
            bag = orders if _INSTRUCTION.search(sentence.text) else plain
            bag.update(_fold(w) for w in _WORD.findall(sentence.text))
    stop = _stopwords()
    return sorted(w for w in orders - plain if w not in stop and len(w) > 1)


def withdraw_unsupported(
    run: AnswerRun, used: Sequence[NodeWithScore], book: BookWords, title: str
) -> None:
    """Replace ``run``'s finished draft when it names someone, or says a number, that none of
    its sources holds, or repeats words the sources hold only in an instruction to the model
    (the draft is kept in ``run.draft``, what was dropped in ``run.withheld``)."""
    if run.error is not None or not run.text.strip():
        return
    asked = " ".join(q for q in (run.question, run.standalone_question) if q)
    texts = [passage(n) for n in used]
    # The book's author is no invented name: "Spitz is a dog in The Call of the Wild by Jack
    # London" holds nothing the passages lack (their metadata names him, as the title).
    authors = {str(n.node.metadata.get("author") or "") for n in used} - {"", "Unknown"}
    # Nor is the chapter its passage is headed with ("Spitz fights Buck in Chapter III").
    chapters = {str(n.node.metadata.get("chapter_title") or "") for n in used} - {""}
    known = " ".join([title, *sorted(authors), *sorted(chapters)])
    said = {_fold(w) for w in _WORD.findall(run.text)}
    # Of those, the words the book never writes in lower case elsewhere ("PWNED", not "answer").
    orders = instruction_words(texts, asked, known)
    obeyed = [w for w in orders if w in said and w not in book.lowercase]
    names = [] if obeyed else unsupported_names(run.text, texts, asked, book, known)
    untied = [] if obeyed or names else untied_names(run.text, asked, texts, book, known)
    echoed = [] if obeyed or names or untied else echoed_names(run.text, asked, book)
    withheld = obeyed or names or untied or echoed  # the first check that found something
    if not withheld:
        return
    logger.info("answer withheld: %s (%r)", withheld, run.text)
    run.draft, run.withheld = run.text, withheld
    if hidden := _not_met(names, book, run.upto_chapter):  # a spoiler, maybe: never echoed
        for name in hidden:
            run.draft = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", NOT_MET, run.draft)
        run.withheld = list(dict.fromkeys(NOT_MET if n in hidden else n for n in names))
        run.text = f"{no_answer_text(title, run.upto_chapter)} {UNNAMED_NOTE}"
        return
    if obeyed:
        note = (
            "(A draft answer repeated an instruction written in the book's text, so it was "
            "withheld.)"
        )
    elif names:
        note = dropped_note(names)
    elif untied:
        note = untied_note(untied)
    else:
        note = echoed_note(echoed)
    run.text = f"{no_answer_text(title, run.upto_chapter)} {note}"


class NameGate:
    """How much of a draft a stream may send before the name check has read all of it.

    The check runs on the finished draft and may withdraw it for a name no source holds, but an
    HTTP stream cannot take back what it sent (the chat UI can replace its bubble). So a stream
    sends text only up to its last whole word, and stops for good at the first capitalised word
    that neither a source, the question nor the title holds: the check can flag no name before
    that point (it flags a subset of such words), so a withdrawn draft never had its name sent.
    """

    def __init__(self, held: Iterable[str], question: str = "") -> None:
        held = list(held)
        self._held = {_fold(w) for t in held for w in _WORD.findall(t)}
        # With the question: the sources' names not tied to it (``tied_names`` below) stop the
        # stream too, since the check may withdraw a draft for them. The names are read by the
        # sources' own usage, which finds every name the book's usage finds (and some more).
        self._untied: set[str] = set()
        if question and asks_for_a_name(question):
            words = BookWords.of(held)
            named = {_fold(n) for t in held for n in names_in(t, words)}
            asked = {_fold(n) for n in names_in(question, words)}
            self._untied = named - asked - tied_names(question, held, words)
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
            if not _known(word, self._held) or f in self._untied:
                self.stopped_at = m.start()
                return m.start()
        self._scanned = whole
        return whole


# ------------------------------------------------ a name tied to what the question asks about
# Is the name an answer gives tied, in the passages, to what the question asks about?
#
# The name check (``answering.name_check``) withdraws a name that no source holds. What it
# cannot see is a name the sources do hold, given as the answer to a question they do not
# answer: "What was the name of Judge Miller's wife?" -> "Mollie" (one of his daughters: the
# book never names a wife), "What is the name of Watson's wife?" -> "Mrs. Hudson", "Who built
# the Lost Cabin?" -> "John Thornton". A small model picks the nearest name on the page.
#
# The test here needs no model: a name that answers the question is written, somewhere in the
# passages the model read, in the same sentence (or the one before or after, where a pronoun carries
# it) as two of the words the question asks about (its content words and its names, stemmed as BM25
# stems them: "wife", "sweater", "Judge", "Lost Cabin"; not "name", "happened" or the book's title).
# "His father, Elmo, a huge St. Bernard, had been the Judge's inseparable companion, and Buck bid
# fair to follow in the way of his father" ties Elmo to "Buck's father"; "the memorable night of
# Manuel's treachery. No one saw him and Buck go off" (with "The Judge was at a meeting" in the same
# sentence) ties Manuel to "Who stole Buck from Judge Miller's place?". Only names the answer adds
# count (one the question already says is no answer to it); an answer with no such name is left
# alone. A draft is withdrawn when none of its new names is tied: one tied name is enough, since a
# right answer may add a second name in passing.

# Words of the question a sentence span must hold to tie its names to it (all, for a shorter
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
    from litrag.scoring.bm25 import tokenize

    return set(tokenize(text))


def question_terms(question: str, title: str = "") -> list[frozenset[str]]:
    """What ``question`` asks about, as groups of stems: each content word alone, and each run
    of capitalised words as one ("Judge Miller's" is one person, not two words of the question);
    less the words that only say what kind of answer is wanted and the words of the title."""
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


def _sentence_spans(sources: Iterable[str]) -> list[str]:
    """Each sentence of each source joined to the one before and the one after (a pronoun's
    reach either way: "Buck would follow at his heels. His transient masters [...] no master
    could be permanent. He was afraid that Thornton would pass out of his life")."""
    from litrag.segment.sentences import split_sentences

    spans: list[str] = []
    for text in sources:
        sentences = [s.text for s in split_sentences(text)]
        spans += [" ".join(sentences[max(i - 1, 0) : i + 2]) for i in range(len(sentences))]
    return spans


def tied_names(question: str, sources: Sequence[str], book: BookWords, title: str = "") -> set[str]:
    """The names (folded) of ``sources`` written next to a word the question asks about."""
    terms = question_terms(question, title)
    tied: set[str] = set()
    if not terms:
        return tied
    need = min(TIE_WORDS, len(terms))
    for span in _sentence_spans(sources):
        stems = _stems(span)
        if sum(1 for group in terms if group & stems) >= need:
            tied.update(_fold(n) for n in names_in(span, book))
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


# ------------------------------------------------ an answer that only says the question back
# "Who killed Thornton?" -> "John Thornton killed Thornton."; "What is Alice's last name?" ->
# "Alice". A small model with the right passage in front of it still answers with the person the
# question is about. Such an answer holds no word the question lacks (the question's person
# counts with the rest of their name: "John Thornton" is the "Thornton" asked about), so it cannot
# be the answer, whatever the passages say: withdrawn for the plain "the passages do not say". A
# question that names two people or offers a choice ("Who wins, Buck or Spitz?") may be answered
# with one of its own names, so it is left alone, as is a question that wants no content (yes/no).

_WH = re.compile(r"^\W*(?:who|whom|whose|what|which|where|when|why|how)\b|\bnamed?\b", re.I)


def _name_runs(text: str, book: BookWords) -> list[list[str]]:
    """The names of ``text`` (by the book's usage) in runs of adjacent words: "John Thornton"."""
    names = {_fold(n) for n in names_in(text, book)}
    runs: list[list[str]] = []
    end = -1
    for m in _WORD.finditer(text):
        word = m.group()
        if _fold(word) not in names:
            end = -1
            continue
        if end >= 0 and not text[end : m.start()].strip():
            runs[-1].append(word)
        else:
            runs.append([word])
        end = m.end()
    return runs


def echoed_names(answer: str, question: str, book: BookWords) -> list[str]:
    """The names of ``answer`` when it adds nothing to a wh-question about one person (every word
    it holds is the question's, or part of the asked person's name); [] otherwise. The title and
    the chapter headings do not count as the question's: "A Mad Tea-Party" heads the chapter
    where "The Hatter and the March Hare are both mad" is an answer."""
    if not _WH.search(question) or re.search(r"\bor\b", question, re.I):
        return []
    asked_runs = _name_runs(question, book)
    if len(asked_runs) != 1:
        return []
    asked = {_fold(w) for w in asked_runs[0]}
    runs = _name_runs(answer, book)
    if not runs or any(not asked & {_fold(w) for w in run} for run in runs):
        return []
    said = _stems(answer) - _stems(question)
    said -= _stems(" ".join(w for run in runs for w in run))
    return [] if said else [" ".join(run) for run in runs]


def echoed_note(names: Sequence[str]) -> str:
    """What the revised reply says of a draft that only said the question back."""
    who = ", ".join(f"“{n}”" for n in names)
    return f"(A draft answer gave only {who}, whom the question itself names, so it was withheld.)"
