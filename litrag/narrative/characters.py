"""The character index of one book: who is named, how often per chapter, where first, with whom.

Built offline (no LLM) from the book's chapters:

1. NER spans (``ner.entity_spans``), any label but numbers and dates: a small model calls Spitz
   an ORG and Francois a GPE, so the label is evidence, not a verdict;
2. each span normalised to a name form, with a title written just before it ("Mr." is outside
   spaCy's PERSON spans) and without possessive or article; forms grouped into characters
   (``aliases.group_forms``);
3. every written form of the kept names found again in the whole text (longest first, case
   sensitive), so a name NER missed in one sentence is still counted there;
4. a group is a character when the text treats it as one: it is named with a title, or NER calls
   it a person, or it speaks or acts (``said Buck``, ``Spitz sprang``), and it is rarely a place
   (``at Netherfield``, ``to Longbourn``). The shares are kept in the index (``evidence``) and the
   thresholds are below, measured on the six shared books (docs/characters.md);
5. in a first-person book, the narrator's given name and surname, which the text may never
   write together (Frankenstein's "Victor" and "Frankenstein"), are one character when both are
   said to him only in dialogue (``narrator``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from llama_index.core.bridge.pydantic import BaseModel, Field

from litrag.narrative.aliases import NameForm, group_forms, parse_name, slug
from litrag.narrative.narrator import NameKind, name_kind, narrator_merges, written_surnames
from litrag.narrative.ner import Span

INDEX_VERSION = 2  # 2: a first-person narrator's given name and surname are one character
MIN_MENTIONS = 3  # fewer than this in the whole book: not indexed
MAX_PLACE_SHARE = 0.35  # of mentions after "at/in/to/from/into/near/..." (not "X's")
MIN_TITLE_SHARE = 0.2
MIN_PERSON_SHARE = 0.6  # of NER spans labelled PERSON
MIN_ACTOR_SHARE = 0.12  # of mentions next to a speech verb or followed by a verb

_TITLE_BEFORE = re.compile(
    r"\b(Mr|Mrs|Miss|Ms|Dr|Doctor|Sir|Lord|Lady|Captain|Capt|Colonel|Col|Professor|Judge|"
    r"Monsieur|Madame|Mademoiselle|Inspector|Lieutenant|Major|General|Count|Countess|Baron|"
    r"King|Queen|Prince|Princess|Duchess|Uncle|Aunt|Mistress|Master|Rev|Reverend)\.?\s+$"
)
_SPEECH = (
    r"said|says|say|cried|replied|asked|answered|exclaimed|added|continued|observed|whispered|"
    r"shouted|returned|remarked|muttered|repeated|called|began|thought|screamed|roared|sobbed|"
    r"growled|snarled|murmured|interrupted|resumed|rejoined|inquired|demanded|declared"
)
_SPEECH_BEFORE = re.compile(rf"\b(?:{_SPEECH})\s+(?:the\s+)?$")
_SPEECH_AFTER = re.compile(rf"^(?:'s)?\s*,?\s*(?:{_SPEECH})\b")
_VERB_AFTER = re.compile(
    r"^\s+(?:[a-z]+ed|was|had|did|could|would|should|might|must|went|saw|came|took|made|ran|"
    r"knew|felt|thought|got|gave|found|told|left|stood|sat|fell|drew|flew|fought|sprang|struck|"
    r"bit|tore|lay|led|rose|began|seemed|looked|turned|is|has|does|will|can|shall|says|goes|"
    r"sees|comes|takes|makes|runs|knows|feels|thinks|gets|gives|finds|tells|wants|loves|hates)\b"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?\"'“”‘’]\s*|\n\s*)$")
_PLACE_BEFORE = re.compile(
    r"\b(?:at|in|into|near|towards|toward|through|within|inside|reached|visit|visited|to|from)"
    r"\s+(?:the\s+)?$",
    re.IGNORECASE,
)


class Character(BaseModel):
    """One character: canonical id, name, aliases and where it is mentioned."""

    id: str = Field(description="Canonical id, unique within the book (a slug of the name).")
    name: str = Field(
        description=(
            "The most-mentioned way of writing the name; given name and surname for a narrator "
            'known by both apart ("Victor Frankenstein").'
        )
    )
    aliases: dict[str, int] = Field(
        description="Every written form -> the chapter it first appears in."
    )
    per_chapter: dict[int, int] = Field(description="Mentions per chapter index.")
    first_chapter: int = Field(description="Chapter of the first mention.")
    first_offset: int = Field(description="Char offset of the first mention in that chapter.")
    first_block: str | None = Field(default=None, description="Node id of the first block.")
    evidence: dict[str, float] = Field(
        default_factory=dict, description="Why this is a character: shares of its mentions."
    )
    narrator_chapters: list[int] = Field(
        default_factory=list,
        description=(
            "For a first-person narrator whose given name and surname were merged (``narrator``): "
            "the chapters where both are said only in dialogue, to him. Empty otherwise."
        ),
    )

    def mentions(self, upto_chapter: int | None = None) -> int:
        return sum(n for ch, n in self.per_chapter.items() if _within(ch, upto_chapter))


class CharacterIndex(BaseModel):
    """The characters of one book, their mentions by chapter and their co-occurrence by block."""

    book_id: str
    model: str = Field(description="The NER pipeline that built it (name and version).")
    version: int = Field(default=INDEX_VERSION, description="Format of this index.")
    characters: list[Character] = Field(default_factory=list)
    # chapter index -> [[start, end, position in ``characters``], ...], chapter offsets
    mentions: dict[int, list[tuple[int, int, int]]] = Field(default_factory=dict)
    # [a, b, chapter, blocks holding both]; a < b
    cooccurrence: list[tuple[str, str, int, int]] = Field(default_factory=list)
    blocks: int = Field(default=0, description="Blocks tagged with their characters.")

    @classmethod
    def class_name(cls) -> str:
        return "CharacterIndex"

    def fingerprint(self) -> str:
        """Changes when any name, alias or mention changes (for the ingestion cache)."""
        data = json.dumps(
            [[c.id, sorted(c.aliases)] for c in self.characters] + [sorted(self.mentions.items())]
        )
        return hashlib.sha256(data.encode()).hexdigest()[:16]

    def by_id(self, char_id: str) -> Character | None:
        return next((c for c in self.characters if c.id == char_id), None)

    def in_span(self, chapter: int, start: int, end: int) -> list[str]:
        """Ids of the characters mentioned in ``[start, end)`` of a chapter, by first mention."""
        seen: dict[str, None] = {}
        for s, e, i in self.mentions.get(chapter, []):
            if s >= start and e <= end:
                seen[self.characters[i].id] = None
        return list(seen)

    def named_in(self, ids: Sequence[str], chapter: int, start: int, end: int) -> int:
        """How often one of ``ids`` is named in ``[start, end)`` of a chapter."""
        wanted = set(ids)
        return sum(
            1
            for s, e, i in self.mentions.get(chapter, [])
            if s >= start and e <= end and self.characters[i].id in wanted
        )

    def upto(self, upto_chapter: int | None = None) -> list[Character]:
        """The characters a reader at ``upto_chapter`` has met, with counts and aliases cut to
        that chapter, most-mentioned first: nothing of a later chapter shows."""
        out = []
        for c in self.characters:
            if not _within(c.first_chapter, upto_chapter):
                continue
            out.append(
                c.model_copy(
                    update={
                        "aliases": {
                            a: ch for a, ch in c.aliases.items() if _within(ch, upto_chapter)
                        },
                        "per_chapter": {
                            ch: n for ch, n in c.per_chapter.items() if _within(ch, upto_chapter)
                        },
                    }
                )
            )
        return sorted(out, key=lambda c: (-c.mentions(), c.first_chapter, c.id))

    def companions(self, char_id: str, upto_chapter: int | None = None) -> list[tuple[str, int]]:
        """Who shares blocks with ``char_id`` (up to a chapter): ``[(id, blocks)]``, most first."""
        n: Counter[str] = Counter()
        for a, b, ch, k in self.cooccurrence:
            if _within(ch, upto_chapter) and char_id in (a, b):
                n[b if a == char_id else a] += k
        return n.most_common()

    def resolve(self, name: str) -> Character | None:
        """The character a name (id, alias or name, any case) stands for."""
        key = name.strip().lower()
        for c in self.characters:
            if key in (c.id, c.name.lower()) or key in (a.lower() for a in c.aliases):
                return c
        return None


def _within(chapter: int, upto_chapter: int | None) -> bool:
    return upto_chapter is None or chapter <= upto_chapter


def _form_pattern(alias: str) -> str:
    words = [
        re.escape(w.rstrip(".")) + (r"\.?" if w.endswith(".") or w == "St" else "")
        for w in alias.split()
    ]
    return r"\s+".join(words)


def build_index(
    book_id: str,
    chapters: Sequence[tuple[int, str]],
    spans: Sequence[Span],
    model: str,
) -> CharacterIndex:
    """The index of ``(chapter_index, text)`` chapters from their NER ``spans``."""
    texts = dict(chapters)
    form_counts: Counter[NameForm] = Counter()
    written: dict[str, NameForm] = {}
    labels: dict[NameForm, Counter[str]] = defaultdict(Counter)
    words = Counter(re.findall(r"[A-Za-z][A-Za-z'-]*", "\n".join(texts.values())))
    vocab = {w for w in words if w.islower()}
    for sp in spans:
        text = texts[sp.chapter]
        before = text[max(0, sp.start - 16) : sp.start]
        m = _TITLE_BEFORE.search(before)
        span = _drop_opening_word(sp.text, before, vocab)
        parsed = parse_name(span, m.group(1) if m else None)
        if parsed is None:
            continue
        form, title_word = parsed
        form_counts[form] += 1
        labels[form][sp.label] += 1
        alias = " ".join(
            [*([_written_title(title_word)] if form.title else []), *form.given, form.surname]
        )
        written.setdefault(alias, form)
    # A "full name" whose first word is a place is two names run together ("London Lydia").
    places = {
        f.surname
        for f, lab in labels.items()
        if not f.full and lab["GPE"] + lab["LOC"] + lab["FAC"] > sum(lab.values()) / 2
    }
    for alias, form in list(written.items()):
        if form.full and form.given[0] in places:
            del written[alias]
    # A bare name that is mostly a common word ("Long", "Hill") is found only with its title.
    for alias, form in list(written.items()):
        if not (form.title or form.full) and words[alias.lower()] >= words[alias]:
            del written[alias]
    # Find every written form again, longest first, and count mentions per form.
    aliases = sorted(written, key=lambda a: (-len(a), a))
    if not aliases:
        return CharacterIndex(book_id=book_id, model=model)
    alternatives = "|".join(f"({_form_pattern(a)})" for a in aliases)
    scan = re.compile(rf"(?<![\w'])(?=[A-Z])(?:{alternatives})(?![\w])")
    found: list[tuple[int, int, int, str]] = []  # chapter, start, end, alias
    for ch, text in chapters:
        for m in scan.finditer(text):
            found.append((ch, m.start(), m.end(), aliases[m.lastindex - 1]))  # type: ignore[operator]
    mention_counts: Counter[NameForm] = Counter(written[a] for *_, a in found)
    counts = {
        f: mention_counts.get(f, 0) + n
        for f, n in form_counts.items()
        if not (f.full and f.given[0] in places)
    }
    groups = group_forms(counts)
    group_of = {f: i for i, g in enumerate(groups) for f in g}
    by_group: dict[int, list[tuple[int, int, int, str]]] = defaultdict(list)
    for item in found:
        by_group[group_of[written[item[3]]]].append(item)
    evidence = {
        gi: _evidence(by_group[gi], texts, group, labels)
        for gi, group in enumerate(groups)
        if len(by_group.get(gi, [])) >= MIN_MENTIONS
    }
    kept = [gi for gi, ev in evidence.items() if _is_character(ev)]
    clusters, narrated = _merge_narrator_names(chapters, groups, kept, by_group)
    characters: list[Character] = []
    keep: dict[int, int] = {}
    used: set[str] = set()
    for cluster in clusters:
        items = [item for gi in cluster for item in by_group[gi]]
        forms = [f for gi in cluster for f in groups[gi]]
        said = Counter(a for *_, a in items)
        name = max(said, key=lambda a: (said[a], len(a)))  # "Lord St. Simon", "Captain X"
        if len(cluster) > 1:  # a given name and a surname, never written together
            name = " ".join(groups[gi][0].surname for gi in cluster)
        cid = slug(name)
        while cid in used:
            cid += "-2"
        used.add(cid)
        first = min(items)
        alias_first: dict[str, int] = {}
        for ch, _s, _e, a in sorted(items):
            alias_first.setdefault(a, ch)
        per_chapter = Counter(ch for ch, *_ in items)
        for gi in cluster:
            keep[gi] = len(characters)
        characters.append(
            Character(
                id=cid,
                name=name,
                aliases=alias_first,
                per_chapter=dict(sorted(per_chapter.items())),
                first_chapter=first[0],
                first_offset=first[1],
                evidence=(
                    evidence[cluster[0]]
                    if len(cluster) == 1
                    else _evidence(items, texts, forms, labels)
                ),
                narrator_chapters=list(narrated.get(cluster[0], ())),
            )
        )
    mentions: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for ch, s, e, a in found:
        gi = group_of[written[a]]
        if gi in keep:
            mentions[ch].append((s, e, keep[gi]))
    return CharacterIndex(
        book_id=book_id, model=model, characters=characters, mentions=dict(mentions)
    )


def _merge_narrator_names(
    chapters: Sequence[tuple[int, str]],
    groups: list[list[NameForm]],
    kept: list[int],
    by_group: dict[int, list[tuple[int, int, int, str]]],
) -> tuple[list[list[int]], dict[int, tuple[int, ...]]]:
    """The kept groups as characters, one each but a first-person narrator's given name and
    surname together ``[given, surname]`` (``narrator``), and the chapters that showed it."""
    surnames: set[str] = set()

    def kind_of(gi: int) -> NameKind | None:
        if not surnames:  # only for the few narrator names of a first-person book
            surnames.update(f.surname for g in groups for f in g if f.full)
            surnames.update(written_surnames([text for _, text in chapters]))
        return name_kind(groups[gi], surnames)

    mentions = {gi: [(ch, s, e) for ch, s, e, _ in by_group[gi]] for gi in kept}
    merges = narrator_merges(chapters, mentions, kind_of)
    pair = {gi: m for m in merges for gi in (m.given, m.surname)}
    clusters: list[list[int]] = []
    for gi in kept:  # a merged pair where its more-mentioned name was
        m = pair.get(gi)
        if m is None:
            clusters.append([gi])
        elif [m.given, m.surname] not in clusters:
            clusters.append([m.given, m.surname])
    return clusters, {m.given: m.chapters for m in merges}


def _drop_opening_word(span: str, before: str, vocab: set[str]) -> str:
    """Without a sentence's capitalised first word caught in the span ("Sometimes Mercedes")."""
    words = span.split()
    if len(words) > 1 and words[0].lower() in vocab and _SENTENCE_START.search(before):
        return " ".join(words[1:])
    return span


def _written_title(word: str) -> str:
    w = word.rstrip(".")
    return w + "." if w in ("Mr", "Mrs", "Ms", "Dr", "Capt", "Col", "Rev") else w


def _evidence(
    items: list[tuple[int, int, int, str]],
    texts: dict[int, str],
    group: list[NameForm],
    labels: dict[NameForm, Counter[str]],
) -> dict[str, float]:
    n = len(items)
    titled = place = actor = 0
    for ch, s, e, alias in items:
        text = texts[ch]
        before, after = text[max(0, s - 24) : s], text[e : e + 24]
        titled += bool(_TITLE_BEFORE.search(alias + " ")) or alias.split()[0].rstrip(".") in (
            "Mr",
            "Mrs",
            "Miss",
            "Ms",
            "Dr",
            "Sir",
            "Lady",
            "Lord",
            "Captain",
            "Colonel",
        )
        place += bool(_PLACE_BEFORE.search(before)) and not after.startswith(("'s", "’s"))
        actor += bool(
            _SPEECH_BEFORE.search(before) or _SPEECH_AFTER.match(after) or _VERB_AFTER.match(after)
        )
    ner = Counter()
    for f in group:
        ner.update(labels.get(f, Counter()))
    tagged = sum(ner.values())
    return {
        "mentions": float(n),
        "title": round(titled / n, 3),
        "person": round(ner["PERSON"] / tagged, 3) if tagged else 0.0,
        "actor": round(actor / n, 3),
        "place": round(place / n, 3),
    }


def _is_character(ev: dict[str, float]) -> bool:
    if ev["place"] > MAX_PLACE_SHARE and ev["title"] < 0.5:  # "to Mr. Duncan Ross" is a letter
        return False
    return (
        ev["title"] >= MIN_TITLE_SHARE
        or ev["person"] >= MIN_PERSON_SHARE
        or ev["actor"] >= MIN_ACTOR_SHARE
    )
