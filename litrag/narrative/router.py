"""Which narrative tool answers a question: question-type rules plus the book's character index.

For the small local model, which cannot call functions, this picks the tool an agent would: a
question about who someone is goes to ``character_profile``, about two characters together to
``plotline``, about a chapter to ``chapter_outline``, about a span or the story so far to
``events_between``, about a character's arc or first appearance to ``character_timeline``;
anything else (and any character question that names nobody the reader has met) to
``search_passages``, today's passage retrieval.

Names are found with the index as the reader knows it (``CharacterIndex.upto``): a character or
alias first met after the spoiler limit is not recognised, so the route itself leaks nothing.
The rules look at the shape of the question (cue words, a name right after "who is", a
possessive that makes the question about someone else: "Buck's father"), not at a list of
questions.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

from llama_index.core.bridge.pydantic import BaseModel

from litrag.narrative.characters import Character, CharacterIndex

_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_ORDINALS = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
).split()
_NUM = r"\d+|[ivxlc]+\b|" + "|".join(_WORDS[1:])
_CHAPTER = rf"(?:chapters?|ch\.?)\s+(?P<{{g}}>{_NUM})"
_RANGE = re.compile(
    rf"\b(?:between|from)\s+(?:chapters?\s+|ch\.?\s*)?(?P<a>{_NUM})\s+(?:and|to|through|till|"
    rf"until)\s+(?:chapter\s+|ch\.?\s*)?(?P<b>{_NUM})"
    rf"|\bchapters?\s+(?P<c>{_NUM})\s*(?:-|–|—|to|through|and)\s*(?:chapter\s+)?(?P<d>{_NUM})",
    re.IGNORECASE,
)
_ONE_CHAPTER = re.compile(_CHAPTER.format(g="n"), re.IGNORECASE)
_ORDINAL_CHAPTER = re.compile(
    r"\b(?:the\s+)?(?P<o>" + "|".join(_ORDINALS[1:]) + r"|last|latest|current|this)\s+chapter\b",
    re.IGNORECASE,
)
_SUMMARY = re.compile(
    r"\b(?:what\s+(?:exactly\s+)?(?:happens|happened|goes\s+on|went\s+on|takes\s+place|took\s+"
    r"place|occurs|occurred|is\s+going\s+on)|going\s+on|what\s+did\s+i\s+miss|summar(?:y|ies|ise|ize|ised|"
    r"ized|ising|izing)|outline|recap|overview|plot|gist|main\s+events|key\s+events|events|"
    r"about|sum\s+up)\b",
    re.IGNORECASE,
)
_STORY = re.compile(
    r"\b(?:what(?:'s|\s+is|\s+was)\s+(?:the|this)\s+(?:book|story|novel|plot)\s+about|"
    r"summar\w*\s+(?:of\s+)?(?:the\s+|this\s+)?(?:book|story|novel|plot)|"
    r"what(?:'s|\s+is)\s+(?:the\s+)?(?:plot|story)\b(?!\s+of)|"
    r"(?:story|plot|book|novel)\s+(?:up\s+to\s+now|so\s+far)|so\s+far|up\s+to\s+now|"
    r"until\s+now|recap|catch\s+me\s+up|what\s+(?:has\s+)?happened\s+(?:already|yet))\b",
    re.IGNORECASE,
)
_RELATION = re.compile(
    r"\b(?:relationship|relations?|related|feel(?:s|ings?)?|felt|attitude|think(?:s)?\s+of|"
    r"thought\s+of|treat(?:s|ed)?|get\s+along|got\s+along|between|friend\w*|enem\w*|rival\w*|"
    r"bond|loves?|loved|hates?|hated|together)\b",
    re.IGNORECASE,
)
_TIMELINE = re.compile(
    r"\b(?:first\s+(?:appear\w*|show\w*|mention\w*|introduc\w*|seen|see|met|meet|enter\w*|"
    r"named|turn\w*\s+up)|introduc(?:ed|tion)|when\s+(?:do|does|did|is|was)\s+(?:we\s+|i\s+)?"
    r"(?:first\s+)?(?:meet|see|hear)|when\s+(?:do|does|did)\s+.{1,30}?\s+(?:appear|show\s+up|"
    r"turn\s+up|arrive|enter|come\s+in)|arc|story|journey|timeline|what\s+(?:happens|happened|"
    r"has\s+happened)\s+to|how\s+(?:does|did|has)\s+.{1,40}?\s+chang\w*|develop\w*|"
    r"becom\w*\s+of|became\s+of)\b",
    re.IGNORECASE,
)
# Weaker: a character's story only when no profile cue says "who is" first.
_TIMELINE_WEAK = re.compile(
    r"\b(?:so\s+far|up\s+to\s+now|until\s+now|been\s+through|gone\s+through|becom\w*|became)\b",
    re.IGNORECASE,
)
_PROFILE = re.compile(
    r"\b(?:who\s+(?:exactly\s+|really\s+)?(?:is|was|are|were)|who's|tell\s+me\s+(?:more\s+)?"
    r"about|what\s+do\s+(?:we|i)\s+know\s+(?:so\s+far\s+)?(?:about|of)|describe|description\s+of|"
    r"what\s+(?:is|was)\s+.{1,30}?\s+like|what\s+(?:kind|sort|type)\s+of|character\s+of|"
    r"personality|profile|information\s+(?:on|about)|introduce)\b",
    re.IGNORECASE,
)
# A possessive after a name makes the question about someone or something else ("Buck's
# father"), unless the noun is the character's own story or nature.
_POSSESSIVE = re.compile(r"^(?:'s|’s|')\s+(?P<noun>[a-z]+)", re.IGNORECASE)
_OWN = {
    "story",
    "arc",
    "journey",
    "timeline",
    "character",
    "personality",
    "nature",
    "life",
    "history",
    "background",
    "role",
    "development",
    "past",
    "fate",
    "profile",
}


_SELF = {"character", "personality", "nature", "profile", "background", "description"}


@dataclass(frozen=True)
class Route:
    """The tool chosen for a question, its arguments and why."""

    tool: str
    kwargs: dict[str, Any]
    reason: str
    by: str = "rules"  # rules; agent (a function-calling LLM chose); fallback
    calls: list[dict[str, Any]] = field(default_factory=list)  # the agent's tool calls

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items() if v is not None)
        return f"{self.tool}({args}) [{self.by}: {self.reason}]"


class Mention(BaseModel):
    """A character named in the question: where, and as what."""

    start: int
    end: int
    text: str
    character: Character


def _number(token: str) -> int | None:
    t = token.lower()
    if t.isdigit():
        return int(t)
    if t in _WORDS:
        return _WORDS.index(t)
    if t in _ORDINALS:
        return _ORDINALS.index(t)
    if re.fullmatch(r"[ivxlc]+", t):
        values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
        total = 0
        for i, ch in enumerate(t):
            v = values[ch]
            total += -v if i + 1 < len(t) and values[t[i + 1]] > v else v
        return total
    return None


def fold(text: str) -> str:
    """Accents off, one character for one ("François" -> "Francois"), so offsets stay."""
    out = []
    for ch in text:
        base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
        out.append(base if len(base) == 1 else ch)
    return "".join(out)


def _normalise(question: str) -> str:
    q = question.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return " ".join(q.split())


def mentions(
    question: str, index: CharacterIndex | None, upto_chapter: int | None = None
) -> list[Mention]:
    """The characters (met by the limit) the question names, in order, longest names first
    where names overlap; the text is matched as written, then case-insensitively."""
    if index is None:
        return []
    q = fold(_normalise(question))
    forms: list[tuple[str, Character]] = []
    for c in index.upto(upto_chapter):
        for form in dict.fromkeys(fold(f) for f in [c.name, *c.aliases]):
            forms.append((form, c))
    forms.sort(key=lambda fc: -len(fc[0]))
    for flags in (0, re.IGNORECASE):
        taken: list[Mention] = []
        for form, c in forms:
            pattern = r"\s+".join(re.escape(w).replace(r"\.", r"\.?") for w in form.split())
            for m in re.finditer(rf"(?<![\w-])(?:{pattern})(?![\w-])", q, flags):
                if any(m.start() < t.end and t.start < m.end() for t in taken):
                    continue
                taken.append(Mention(start=m.start(), end=m.end(), text=m.group(), character=c))
        if taken:
            return sorted(taken, key=lambda t: t.start)
    return []


def _chapter_of(q: str, limit: int | None, chapters: int | None) -> int | None:
    m = _ONE_CHAPTER.search(q)
    if m:
        return _number(m.group("n"))
    m = _ORDINAL_CHAPTER.search(q)
    if m:
        word = m.group("o").lower()
        if word in ("last", "latest", "current", "this"):
            return limit if limit is not None else chapters
        return _number(word)
    return None


def _about_self(q: str, m: Mention) -> bool:
    """False when a possessive makes the question about something of the character's."""
    after = _POSSESSIVE.match(q[m.end :])
    return after is None or after.group("noun").lower() in _OWN


def route(
    question: str,
    index: CharacterIndex | None,
    *,
    upto_chapter: int | None,
    chapters: int | None,
) -> Route:
    """The tool for ``question`` (see the module's rules); ``chapters``: the book's count."""
    q = _normalise(question)
    last = upto_chapter if upto_chapter is not None else chapters
    named = mentions(q, index, upto_chapter)
    people: list[Mention] = []
    for m in named:
        if all(p.character.id != m.character.id for p in people):
            people.append(m)
    first_name = people[0].character.name if people else None

    r = _RANGE.search(q)
    if r:
        a = _number(r.group("a") or r.group("c"))
        b = _number(r.group("b") or r.group("d"))
        if a is not None and b is not None:
            return Route(
                "events_between",
                {"chapter_from": min(a, b), "chapter_to": max(a, b), "name": first_name},
                "a span of chapters",
            )
    chapter = _chapter_of(q, upto_chapter, chapters)
    if chapter is not None and _SUMMARY.search(q):
        return Route("chapter_outline", {"chapter": chapter}, f"what happens in chapter {chapter}")
    if not people and _STORY.search(q) and last is not None:
        return Route(
            "events_between",
            {"chapter_from": 1, "chapter_to": last, "name": None},
            "the story so far",
        )
    if len(people) >= 2:
        a, b = people[0], people[1]
        joined = re.fullmatch(r"\s*(?:,|&|and|,\s*and)\s*", q[a.end : b.start]) is not None
        if _RELATION.search(q) or (joined and len(people) == 2):
            return Route(
                "plotline",
                {"name_a": a.character.name, "name_b": b.character.name},
                "two characters together",
            )
        return Route("search_passages", {"query": question}, "a detail about several characters")
    if people:
        who = people[0]
        if _about_self(q, who):
            timeline = Route(
                "character_timeline",
                {"name": who.character.name, "upto_chapter": upto_chapter},
                "a character's story or first appearance",
            )
            if _TIMELINE.search(q):
                return timeline
            cue = _PROFILE.search(q)
            own = _POSSESSIVE.match(q[who.end :])
            if (
                (own is not None and own.group("noun").lower() in _SELF)  # "Buck's personality"
                or (cue and cue.start() <= who.start)  # "who is Buck", "tell me about Buck"
                or (cue and re.search(r"\b(?:like|kind|sort|type)\b", q))  # "what is Buck like"
                or (  # "remind me who Hal is"
                    re.search(r"\bwho\s+$", q[: who.start], re.IGNORECASE)
                    and re.match(r"\s+(?:really\s+)?(?:is|was)\b", q[who.end :], re.IGNORECASE)
                )
            ):
                return Route(
                    "character_profile",
                    {"name": who.character.name, "upto_chapter": upto_chapter},
                    "who a character is",
                )
            if _TIMELINE_WEAK.search(q):
                return timeline
        return Route("search_passages", {"query": question}, "a detail of the story")
    if _PROFILE.search(q) and index is not None:
        return Route("search_passages", {"query": question}, "names no character the reader met")
    return Route("search_passages", {"query": question}, "no narrative cue")
