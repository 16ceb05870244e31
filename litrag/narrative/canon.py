"""LLM names to canonical ids of the book's offline character index (``characters.CharacterIndex``).

A name is looked up, in order: as an alias, name or id of the index (any case); as a name form
(``aliases.parse_name``: article, possessive and title handled) equal to an indexed form, the
title aside when the name has a given name ("John Knightley" is "Mr. John Knightley"); then, for
a person or animal named by given name and surname, by its parts:

- given name and surname each the name of one indexed character, two different ones: the LLM has
  said they are one ("Victor Frankenstein": Frankenstein's ``victor`` and ``frankenstein``, which
  the text never writes together). The name resolves to both and a **link** is recorded. Guards:
  the given-name character is named bare and rarely titled (not "Colonel Fitzwilliam", whom
  "Fitzwilliam Darcy" must not join), neither character already has a full name, and each part
  names exactly one character (a family surname such as "Bennet" names several: no link);
- else the one character of the surname, else the one of the given name ("Jane Bennet" is Jane:
  "Bennet" names three).

Anything else is an entity of its own, with the slug of its name as id. A link is an asset like
any other: stamped with the chapter and block it was read in, so a profile "as of chapter N"
merges two ids only when the reader has met the full name by then.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from litrag.narrative.aliases import NameForm, parse_name, slug
from litrag.narrative.characters import MIN_TITLE_SHARE, CharacterIndex


@dataclass(frozen=True)
class Resolved:
    """What a name stands for: canonical ids (two when it links them), first the kept one."""

    ids: tuple[str, ...]
    indexed: bool
    how: str  # "alias", "form", "link", "surname", "given", "new"

    @property
    def id(self) -> str:
        return self.ids[0]


@dataclass
class _Forms:
    exact: dict[tuple[str | None, tuple[str, ...], str], set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )
    untitled_full: dict[tuple[tuple[str, ...], str], set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )
    bare: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    one_name: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    has_full: set[str] = field(default_factory=set)


def _clean(name: str) -> str:
    words = name.replace("’", "'").strip(" \t\n.,;:!?\"'()[]").split()
    if words and words[0].lower() in ("the", "a", "an"):
        words = words[1:]
    if words:
        words[-1] = words[-1].removesuffix("'s").removesuffix("'")
    return " ".join(words)


class Canonicalizer:
    """Resolves LLM entity names against one book's character index (or none: slugs only)."""

    def __init__(self, index: CharacterIndex | None) -> None:
        self.index = index
        self._forms = _Forms()
        self._mentions: dict[str, int] = {}
        for c in index.characters if index is not None else []:
            self._mentions[c.id] = c.mentions()
            for alias in [c.name, *c.aliases]:
                parsed = parse_name(alias)
                if parsed is None:
                    continue
                f: NameForm = parsed[0]
                self._forms.exact[(f.title, f.given, f.surname)].add(c.id)
                if f.given:
                    self._forms.untitled_full[(f.given, f.surname)].add(c.id)
                    self._forms.has_full.add(c.id)
                else:
                    self._forms.one_name[f.surname].add(c.id)
                    if f.title is None:
                        self._forms.bare[f.surname].add(c.id)

    def name_of(self, cid: str) -> str | None:
        c = self.index.by_id(cid) if self.index is not None else None
        return c.name if c is not None else None

    def resolve(self, name: str, kind: str = "person") -> Resolved:
        cleaned = _clean(name)
        if self.index is not None and cleaned:
            hit = self.index.resolve(name) or self.index.resolve(cleaned)
            if hit is not None:
                return Resolved((hit.id,), True, "alias")
        parsed = parse_name(cleaned) if cleaned else None
        if parsed is None or self.index is None:
            return Resolved((slug(cleaned or name) or "unnamed",), False, "new")
        f = parsed[0]
        forms = self._forms
        one = _only(forms.exact.get((f.title, f.given, f.surname), set()))
        if one is None and f.given:
            one = _only(forms.untitled_full.get((f.given, f.surname), set()))
        if one is None and not f.given and f.title is not None:
            one = _only(forms.one_name.get(f.surname, set()))  # "Mr Knightley" for "Mr. K."
        if one is not None:
            return Resolved((one,), True, "form")
        if f.given and kind in ("person", "animal"):
            by_given = forms.bare.get(f.given[0], set())
            by_surname = forms.one_name.get(f.surname, set())
            a, b = _only(by_given), _only(by_surname)
            if a and b and a != b and self._may_link(a, b):
                keep, other = sorted((a, b), key=lambda x: (-self._mentions.get(x, 0), x))
                return Resolved((keep, other), True, "link")
            if b:
                return Resolved((b,), True, "surname")
            if a and (len(by_surname) > 1 or not by_surname):
                return Resolved((a,), True, "given")
        return Resolved((slug(cleaned),), False, "new")

    def _may_link(self, given_id: str, surname_id: str) -> bool:
        if given_id in self._forms.has_full or surname_id in self._forms.has_full:
            return False
        c = self.index.by_id(given_id) if self.index is not None else None
        return c is not None and c.evidence.get("title", 0.0) < MIN_TITLE_SHARE


def _only(ids: set[str]) -> str | None:
    return next(iter(ids)) if len(ids) == 1 else None
