"""Names as a reader writes them, and which of them are one character.

A name form is ``(title group, given names, surname)``: "Mr. Knightley" is ``("mr", (),
"Knightley")``, "George Knightley" ``(None, ("George",), "Knightley")``, "Buck" a bare
``(None, (), "Buck")``. Forms are grouped with union-find by rules meant never to merge a family:

1. a full name joins its titled surname only when neither has a rival: one full name with that
   surname, one title group ("Sherlock Holmes" and "Mr. Holmes"); for "Mr." the given name must
   be rarer alone than in the full name ("John" alone is John Knightley, not Mr. Knightley); and
   "Miss S" joins the family's only full name ("Miss Woodhouse" is Emma Woodhouse);
2. a titled given name joins the full name that holds ``DOMINANT`` of that given name's full
   mentions ("Lady Catherine" and "Catherine de Bourgh", "Miss Elizabeth" and "Elizabeth Bennet");
3. a bare name joins the full name holding that given name ("Elizabeth"), else "Mr." of that
   surname (narration names men by bare surname: "Bingley" is Mr. Bingley, never Miss Bingley),
   else a dominant "Miss", else the full name holding that surname ("Thornton" -> "John
   Thornton", "Turtle" -> "Mock Turtle");
4. a few English pet names count as their formal name in rule 3 ("Lizzy" -> "Elizabeth").

Mr., Mrs. and Miss are different title groups, so "Mr. Bennet", "Mrs. Bennet" and "Miss Bennet"
(Jane, by the convention for the eldest daughter, which the text alone does not say) stay three
characters, and "Mrs. John Knightley" is not her husband.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

# Title words -> group. Forms in one group may be one person; forms in two never are.
TITLES: dict[str, str] = {
    **dict.fromkeys(
        "mr mister sir lord captain capt colonel col dr doctor professor prof judge monsieur "
        "inspector lieutenant major general count baron king prince uncle rev reverend".split(),
        "mr",
    ),
    **dict.fromkeys("mrs madame mistress".split(), "mrs"),
    **dict.fromkeys("miss ms mademoiselle mlle".split(), "miss"),
    **dict.fromkeys("lady aunt countess queen princess duchess".split(), "lady"),
}
# Surname particles stay with the surname ("Catherine de Bourgh").
PARTICLES = frozenset("de du da di von van der le la del st".split())
# Pet names that stand for one formal given name (English usage; kept short on purpose).
PET_NAMES: dict[str, str] = {
    "Lizzy": "Elizabeth",
    "Lizzie": "Elizabeth",
    "Eliza": "Elizabeth",
}
# Capitalised words NER tags as people that are forms of address or not characters.
NOT_NAMES = frozenset(
    "Majesty Highness Lordship Ladyship Honour Grace Madam Sir Lord God Heaven Heavens "
    "Providence Nature Fortune Fate Christ Jesus Miss Mr Mrs Dr Chapter Volume Book Part "
    "I Oh Ah Yes No Well Hush Pray Good Dear Poor Old Young Little Project Gutenberg Alas Hark "
    "Lo Farewell Adieu Hurrah Alack".split()
)
# Titles that name a character on their own ("said the Queen").
STANDALONE_TITLES = frozenset(
    "King Queen Duchess Prince Princess Captain Colonel Doctor Professor Judge Inspector "
    "Countess Baron Major General".split()
)
VOCATIVES = frozenset("O Oh Ah Dear Poor".split())
DOMINANT = 0.75  # share of a surname's titled mentions that makes one title its owner

_TOKEN = re.compile(r"[A-Z][\w'’-]*|[a-z]+")


@dataclass(frozen=True, order=True)
class NameForm:
    """One way of writing a name, normalised (no possessive, no article, one space)."""

    title: str | None  # a TITLES group, or None
    given: tuple[str, ...]
    surname: str  # the last name, or the only name

    @property
    def text(self) -> str:
        words = [*self.given, self.surname]
        if self.title:
            words.insert(0, _TITLE_TEXT[self.title])
        return " ".join(words)

    @property
    def full(self) -> bool:
        return bool(self.given)


_TITLE_TEXT = {"mr": "Mr.", "mrs": "Mrs.", "miss": "Miss", "lady": "Lady"}


def parse_name(text: str, title_word: str | None = None) -> tuple[NameForm, str] | None:
    """The form of an NER span (``title_word`` is a title just before it in the text), with the
    title as written; None for what is not a name (lower-case words, headings, forms of address).
    """
    words = text.replace("’", "'").split()
    if words and words[0].lower() == "the":
        words = words[1:]
    if words:
        last = re.sub(r"('s|')$", "", words[-1])
        words[-1] = last
    if any(re.search(r"[,;:!?]$", w) for w in words[:-1]):  # "Harriet, Harriet"
        return None
    words = [w.strip('.,;:!?"()[]_') for w in words]
    words = [w for w in words if w]
    while len(words) > 1 and words[0] in VOCATIVES:  # "O Mouse"
        words = words[1:]
    title = None
    written = title_word
    if title_word:
        title = TITLES.get(title_word.lower().rstrip("."))
    while words and words[0].lower().rstrip(".") in TITLES:
        if len(words) == 1 and words[0] in STANDALONE_TITLES:  # "the Queen", "the Duchess"
            break
        written = words[0]
        title = TITLES[words.pop(0).lower().rstrip(".")]
    if "of" in words:  # "Queen of Hearts" -> "Queen"
        words = words[: words.index("of")]
    if not words or len(words) > 4:
        return None
    for i, w in enumerate(words):
        if w.lower() in PARTICLES and i < len(words) - 1:
            continue
        if not w[0].isupper() or (len(w) > 1 and w.isupper()) or not w[0].isalpha():
            return None
        if not re.fullmatch(r"[A-Za-z][A-Za-z'-]*", w):
            return None
    if len(words) == 1 and words[0] in NOT_NAMES:
        return None
    # Particles glue to the surname: "Catherine de Bourgh" -> given ("Catherine",), "de Bourgh".
    cut = len(words) - 1
    while cut > 0 and words[cut - 1].lower() in PARTICLES:
        cut -= 1
    given, surname = tuple(words[:cut]), " ".join(words[cut:])
    if any(g in NOT_NAMES for g in given) or surname in NOT_NAMES or surname in given:
        return None
    return NameForm(title=title, given=given, surname=surname), (written or "")


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[NameForm, NameForm] = {}

    def find(self, x: NameForm) -> NameForm:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: NameForm, b: NameForm) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def group_forms(counts: Mapping[NameForm, int]) -> list[list[NameForm]]:
    """The forms of ``counts`` grouped into characters (rules in the module docstring); each
    group most-mentioned form first, groups most-mentioned first."""
    uf = _UnionFind()
    forms = list(counts)
    for f in forms:
        uf.find(f)
    # Full names by (given, surname): a titled full name ("Mr. John Knightley") is the same
    # person as the untitled one, but "Mrs. John Knightley" is his wife: her forms stay apart.
    full_by_key: dict[tuple[str, str], list[NameForm]] = defaultdict(list)
    wives: dict[tuple[str, str], list[NameForm]] = defaultdict(list)
    for f in forms:
        if f.full:
            (wives if f.title == "mrs" else full_by_key)[(f.given[0], f.surname)].append(f)
    for group in wives.values():
        for f in group[1:]:
            uf.union(group[0], f)
    for group in full_by_key.values():
        for f in group[1:]:
            uf.union(group[0], f)
    titled: dict[str, Counter[str]] = defaultdict(Counter)  # single name -> title group counts
    for f in forms:
        if f.title and not f.full:
            titled[f.surname][f.title] += counts[f]
    # A full name seen once is likely a misread span ("London Lydia").
    fulls = {k: v[0] for k, v in full_by_key.items() if sum(counts[f] for f in v) >= 2}
    full_count = {k: sum(counts[f] for f in full_by_key[k]) for k in fulls}
    full_by_surname: dict[str, list[tuple[str, str]]] = defaultdict(list)
    full_by_given: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in fulls:
        full_by_given[key[0]].append(key)
        full_by_surname[key[1]].append(key)

    def dominant(keys: list[tuple[str, str]]) -> NameForm | None:
        """The full name holding DOMINANT of these names' mentions, if one does."""
        if not keys:
            return None
        best = max(keys, key=lambda k: full_count[k])
        ok = full_count[best] >= DOMINANT * sum(full_count[k] for k in keys)
        return fulls[best] if ok else None

    def titled_form(name: str, group: str) -> NameForm:
        return NameForm(title=group, given=(), surname=name)

    for surname, groups in titled.items():
        person = dominant(full_by_surname.get(surname, []))
        if person is None:
            continue
        # Rule 1: a full name joins the titled surname when neither has a rival (not "Mrs.":
        # Madame Moritz is Justine Moritz's mother).
        # For "Mr.", the given name must be rarely said alone: "John" on its own is someone the
        # family calls by name (John Knightley, not Mr. Knightley); "Sherlock" alone is rare.
        if len(groups) == 1 and len(full_by_surname[surname]) == 1:
            (group,) = groups
            alone = counts.get(NameForm(None, (), person.given[0]), 0)
            if group == "mr" and alone >= full_count[(person.given[0], surname)]:
                continue
            if group in ("mr", "miss") and person.title in (None, group):
                uf.union(titled_form(surname, group), person)
        # "Miss S" is the daughter the family's full names point to ("Miss Woodhouse" is Emma).
        elif (
            "miss" in groups
            and len({k for k in full_by_key if k[1] == surname}) == 1
            and person.title in (None, "miss")
        ):
            uf.union(person, titled_form(surname, "miss"))
    # Rule 2: a titled given name joins the full name that holds that given name.
    for name, groups in titled.items():
        person = dominant(full_by_given.get(name, []))
        if person is not None and name not in full_by_surname:
            for group in groups:
                if person.title in (None, group):
                    uf.union(person, titled_form(name, group))
    # Rules 3 and 4: bare names.
    for f in forms:
        if f.title or f.full:
            continue
        name = PET_NAMES.get(f.surname, f.surname)
        person = dominant(full_by_given.get(name, []))
        if person is not None and name not in full_by_surname:
            uf.union(person, f)
            continue
        if name != f.surname:  # a pet name with no full name: join the bare formal name
            formal = NameForm(None, (), name)
            if formal in counts:
                uf.union(formal, f)
            continue
        groups = titled.get(name, Counter())
        # Narration names men by bare surname and married women by title ("Bingley" is Mr.
        # Bingley, never Miss Bingley; "Frankenstein" is not Madame Frankenstein); "Miss" goes
        # with given names too ("Miss Alice"), so a dominant Miss takes the bare name.
        if "mr" in groups:
            uf.union(titled_form(name, "mr"), f)
            continue
        if "miss" in groups and groups["miss"] >= DOMINANT * sum(groups.values()):
            uf.union(titled_form(name, "miss"), f)
            continue
        person = dominant(full_by_surname.get(name, []))
        if person is not None:
            uf.union(person, f)
    groups_of: dict[NameForm, list[NameForm]] = defaultdict(list)
    for f in forms:
        groups_of[uf.find(f)].append(f)
    out = [sorted(g, key=lambda f: (-counts.get(f, 0), f.text)) for g in groups_of.values()]
    return sorted(out, key=lambda g: (-sum(counts.get(f, 0) for f in g), g[0].text))


def slug(text: str) -> str:
    """A canonical id: lower case, words joined by '-' ("Mr. Knightley" -> "mr-knightley")."""
    return "-".join(_TOKEN.findall(text.replace("’", "'"))).lower().replace("'", "")
