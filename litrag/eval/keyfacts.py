"""Key-fact scoring of answers to the reader questions (``reader_questions.jsonl``).

The file is ``data/questions/reader_questions.jsonl``, frozen before any run on it.

Reference-answer metrics (token F1, ROUGE) reward an answer for sharing words with one wording of
the answer, so a correct answer in other words scores low and a fluent wrong one scores well. A
reader question instead lists the facts a correct answer must state, each with its accepted
variants, plus strings a correct answer must not contain (later-chapter names for spoiler
questions). Checking them by substring is deterministic, needs no model, and a failure can be read
off the answer by hand.

Matching: answer and variants both go through :func:`normalise` (lower case, accents folded,
apostrophes dropped, thousands separators dropped, every other non-alphanumeric character a space)
and a variant must start at a word boundary of the answer. Stems still work ("gambl" finds
"gambling") but short names do not fire inside other words ("hal" does not match "shall").

Correctness: an ``unanswerable`` question is right only when the answer abstains. A ``spoiler``
question is right when every key fact is found and nothing forbidden is: declining to go past the
reader's chapter is the right behaviour there, so abstention is not held against it. Every other
class needs all key facts, no forbidden string and no abstention.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLASSES = (
    "detail",
    "who-is",
    "relationship",
    "why",
    "chapter",
    "whole-book",
    "spoiler",
    "unanswerable",
)
_FIELDS = {
    "id",
    "book_file",
    "question",
    "class",
    "upto_chapter",
    "key_facts",
    "forbidden",
    "evidence",
    "chapter",
    "note",
}
_ID = re.compile(r"reader\.pg\d+\.\d{2,}")


@dataclass(frozen=True)
class ReaderQuestion:
    """One row of the reader-question file (``class`` is spelt ``class_`` here)."""

    id: str
    book_file: str
    question: str
    class_: str
    upto_chapter: int | None
    key_facts: tuple[tuple[str, ...], ...]
    forbidden: tuple[str, ...]
    evidence: tuple[str, ...] | None
    chapter: int | None
    note: str


@dataclass(frozen=True)
class KeyFactScore:
    """How one answer fares against one question's key facts and forbidden strings."""

    facts_found: int
    facts_total: int
    all_facts: bool
    forbidden_hits: list[str]
    abstained: bool
    correct: bool

    @property
    def partial(self) -> float:
        """Share of key facts found; for a question without facts, 1.0 when correct else 0.0."""
        if self.facts_total == 0:
            return 1.0 if self.correct else 0.0
        return self.facts_found / self.facts_total


# ------------------------------------------------------------------------------ normalisation
_APOSTROPHES = re.compile(r"['\u2018\u2019\u02bc`]")
_DIGIT_SEP = re.compile(r"(?<=\d)[,.](?=\d)")
_NON_WORD = re.compile(r"[^a-z0-9]+")


def normalise(text: str) -> str:
    """Lower case, accents folded, apostrophes and digit separators dropped, the rest spaces.

    So "François" is "francois", "haven't" is "havent", "$1,600" is "1600" and "St. Bernard" is
    "st bernard", whichever typography the answer or the variant uses.
    """
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = _DIGIT_SEP.sub("", _APOSTROPHES.sub("", text))
    return " ".join(_NON_WORD.sub(" ", text).split())


def _has(normalised_text: str, variant: str) -> bool:
    """Whether ``variant`` (normalised here) starts at a word boundary of the normalised text."""
    v = normalise(variant)
    return bool(v) and f" {v}" in f" {normalised_text}"


# ------------------------------------------------------------------------------ abstention
_ABSTAIN = tuple(
    normalise(p)
    for p in (
        "doesn't say",
        "does not say",
        "do not say",  # the product's own reply (answering.quote.no_answer_text)
        "don't say",
        "doesn't state",
        "does not state",
        "not stated",
        "never stated",
        "doesn't mention",
        "does not mention",
        "not mentioned",
        "never mentioned",
        "never mentions",  # answering.name_check's reply
        "no mention",
        "doesn't tell",
        "does not tell",
        "never says",
        "never named",
        "not named",
        "never names",
        "doesn't name",
        "does not name",
        "never gives",
        "never tells",
        "never reveals",
        "not given",
        "not specified",
        "not revealed",
        "i don't know",
        "i do not know",
        "i'm not sure",
        "i am not sure",
        "cannot answer",
        "can't answer",
        "unable to answer",
        "no passage",
        "the passages do not",
        "the passages don't",
        "the passage does not",
        "the passage doesn't",
        "the text does not",
        "the text doesn't",
        "the book does not",
        "the book doesn't",
        "not in the book",
        "no information",
        "not enough information",
        "haven't reached",
        "have not reached",
        "not reached",
        "not got that far",
        "haven't got to",
        "have not got to",
        "can't say",
        "cannot say",
        "cannot tell",
        "can't tell",
        "no answer",
    )
)


def is_abstention(answer: str) -> bool:
    """Whether the answer declines: "the book doesn't say", "I don't know", "not stated", ...

    Phrase matching, not a judge: an answer that hedges ("the book doesn't say exactly, but ...")
    counts as abstaining too, which is the cautious reading for a benchmark of abstention.
    """
    text = normalise(answer)
    return not text or any(_has(text, p) for p in _ABSTAIN)


# ------------------------------------------------------------------------------ scoring
def score_answer(q: ReaderQuestion, answer: str) -> KeyFactScore:
    """Score one answer: key facts found, forbidden strings hit, abstention, correctness."""
    text = normalise(answer)
    found = sum(any(_has(text, v) for v in fact) for fact in q.key_facts)
    hits = [f for f in q.forbidden if _has(text, f)]
    abstained = is_abstention(answer)
    all_facts = found == len(q.key_facts)
    if q.class_ == "unanswerable":
        correct = abstained
    elif q.class_ == "spoiler":
        correct = all_facts and not hits
    else:
        correct = all_facts and not hits and not abstained
    return KeyFactScore(found, len(q.key_facts), all_facts, hits, abstained, correct)


def summarise(scores: Sequence[KeyFactScore], classes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per-class (and ``"all"``) counts and accuracy; ``classes[i]`` is ``scores[i]``'s class."""
    if len(scores) != len(classes):
        raise ValueError(f"{len(scores)} scores but {len(classes)} classes")
    groups: dict[str, list[KeyFactScore]] = {"all": list(scores)}
    for s, c in zip(scores, classes, strict=True):
        groups.setdefault(c, []).append(s)
    out: dict[str, dict[str, Any]] = {}
    for name in [
        "all",
        *(c for c in CLASSES if c in groups),
        *sorted(set(groups) - {"all", *CLASSES}),
    ]:
        g = groups[name]
        n = len(g)
        correct = sum(s.correct for s in g)
        out[name] = {
            "n": n,
            "correct": correct,
            "accuracy": correct / n if n else 0.0,
            "partial": sum(s.partial for s in g) / n if n else 0.0,
            "abstained": sum(s.abstained for s in g),
            "forbidden_hit": sum(bool(s.forbidden_hits) for s in g),
        }
    return out


# ------------------------------------------------------------------------------ loading
def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{what} must be a list of non-empty strings")
    return tuple(value)


def _row(obj: Any) -> ReaderQuestion:
    if not isinstance(obj, dict):
        raise ValueError("a row must be a JSON object")
    missing, extra = _FIELDS - obj.keys(), obj.keys() - _FIELDS
    if missing or extra:
        raise ValueError(f"missing fields {sorted(missing)}, unknown fields {sorted(extra)}")
    for key in ("id", "book_file", "question", "class"):
        if not isinstance(obj[key], str) or not obj[key].strip():
            raise ValueError(f"{key} must be a non-empty string")
    if not _ID.fullmatch(obj["id"]):
        raise ValueError(f"id {obj['id']!r} is not like 'reader.pg215.01'")
    cls = obj["class"]
    if cls not in CLASSES:
        raise ValueError(f"class {cls!r} is not one of {', '.join(CLASSES)}")
    for key in ("upto_chapter", "chapter"):
        v = obj[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{key} must be a positive integer or null")
    if cls == "spoiler" and obj["upto_chapter"] is None:
        raise ValueError("a spoiler question needs upto_chapter")
    if not isinstance(obj["key_facts"], list):
        raise ValueError("key_facts must be a list of lists of strings")
    facts = tuple(_strings(f, "each key fact") for f in obj["key_facts"])
    if any(not f for f in facts):
        raise ValueError("a key fact needs at least one variant")
    if any(v != v.lower() or not normalise(v) for f in facts for v in f):
        raise ValueError("key-fact variants must be lower case and not only punctuation")
    forbidden = _strings(obj["forbidden"], "forbidden")
    if any(not normalise(f) for f in forbidden):
        raise ValueError("forbidden strings must not be only punctuation")
    evidence = obj["evidence"]
    if isinstance(evidence, str):
        evidence = [evidence]
    if cls == "unanswerable":
        if facts or evidence is not None:
            raise ValueError("an unanswerable question has key_facts [] and evidence null")
    else:
        if not facts:
            raise ValueError(f"a {cls} question needs key facts")
        if evidence is None or not 1 <= len(evidence) <= 2:
            raise ValueError("evidence must be one or two sentences")
    if not isinstance(obj["note"], str):
        raise ValueError("note must be a string")
    return ReaderQuestion(
        id=obj["id"],
        book_file=obj["book_file"],
        question=obj["question"],
        class_=cls,
        upto_chapter=obj["upto_chapter"],
        key_facts=facts,
        forbidden=forbidden,
        evidence=None if evidence is None else _strings(evidence, "evidence"),
        chapter=obj["chapter"],
        note=obj["note"],
    )


def load_reader_questions(path: str | Path) -> list[ReaderQuestion]:
    """Read and validate the JSONL file; a bad row raises ValueError naming file and line."""
    path = Path(path)
    rows: list[ReaderQuestion] = []
    seen: set[str] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = _row(json.loads(line))
            if q.id in seen:
                raise ValueError(f"duplicate id {q.id}")
        except (json.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from exc
        seen.add(q.id)
        rows.append(q)
    return rows
