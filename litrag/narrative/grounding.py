"""Is an LLM-written fact supported by the block it was read in?

A small model writes, from chapter 1 of a famous book, facts it remembers from the end of it
("He is a wolf pack leader"), and the spoiler filter cannot catch them: they are stamped with
the chapter they were (not) read in. So every fact, event, relation and description is checked
against its own block's text before it becomes an asset:

- every name it states (a capitalised word after the first, and the entity names given with
  it, possessive and plural s aside) must appear in the block, and
- most of its content words must too: at least ``MIN_SHARE`` of its BM25 stems (Snowball, stop
  words out) are stems of the block. A relation is checked on its two names only: its verb is a
  short label ("is the rival of") a faithful reader writes in its own words.

A lexical test, on purpose: it is cheap (no second LLM call per item, which would double the
asset build on 2 cores), it cannot be talked round, and the things it drops are the ones a
reader must not see (names and events from elsewhere). Paraphrase is what it costs: a fact
reworded beyond half its words is dropped too, and counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from litrag.narrative.schema import BlockExtraction
from litrag.scoring.bm25 import tokenize

MIN_SHARE = 0.6
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[-'][A-Za-z]+)?\b")


def _forms(key: str) -> list[str]:
    """A name as written, without a possessive, without a plural s ("Buck's", "Bernards")."""
    forms = [key]
    if key.endswith("'s"):
        forms.append(key[:-2])
    elif key.endswith("s") and len(key) > 3:
        forms.append(key[:-1])
    return forms


def _folded(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s'-]", " ", text).split()).lower()


@dataclass
class Grounding:
    """One block's check: how many items were kept, and what was dropped (and why)."""

    kept: int = 0
    dropped: list[str] = field(default_factory=list)


class BlockText:
    """A block's text, ready to test statements against."""

    def __init__(self, text: str) -> None:
        self.folded = f" {_folded(text)} "
        self.stems = set(tokenize(text))

    def names(self, statement: str, extra: Iterable[str] = ()) -> list[str]:
        """The names ``statement`` states that the block never writes."""
        # The opening word is capitalised as the sentence's first ("One of the daughters ..."):
        # not taken for a name; the item's own names come as ``extra`` and are checked.
        found = [m.group(0) for m in _NAME.finditer(statement) if m.start() > 0]
        missing = []
        for name in [*found, *extra]:
            key = _folded(name)
            if key and not any(self._written(k) for k in _forms(key)):
                missing.append(name)
        return missing

    def _written(self, key: str) -> bool:
        return f" {key} " in self.folded or self._any_part(key)

    def _any_part(self, key: str) -> bool:
        """A multi-word name counts when one of its parts is written ("Mr. Knightley")."""
        parts = [p for p in key.split() if len(p) > 2 and p not in {"mr", "mrs", "miss", "the"}]
        return len(parts) > 1 and any(f" {p} " in self.folded for p in parts)

    def share(self, statement: str) -> float:
        stems = set(tokenize(statement))
        return len(stems & self.stems) / len(stems) if stems else 1.0

    def why_unsupported(self, statement: str, names: Iterable[str] = ()) -> str | None:
        """None when the block supports ``statement``, else the reason (one line)."""
        missing = self.names(statement, names)
        if missing:
            return f"names {', '.join(missing)}, absent from its block"
        share = self.share(statement)
        if share < MIN_SHARE:
            return f"{share:.0%} of its words are in its block (under {MIN_SHARE:.0%})"
        return None


def ground_extraction(extraction: BlockExtraction, text: str) -> tuple[BlockExtraction, Grounding]:
    """The extraction with the items its block does not support removed (descriptions blanked),
    and the count of what was kept and dropped."""
    block = BlockText(text)
    g = Grounding()

    def keep(kind: str, statement: str, names: Iterable[str] = ()) -> bool:
        why = block.why_unsupported(statement, names)
        if why is None:
            g.kept += 1
            return True
        g.dropped.append(f"{kind} {statement!r}: {why}")
        return False

    facts = [f for f in extraction.facts if keep("fact", f.fact, [f.entity])]
    events = [e for e in extraction.events if keep("event", e.summary, e.participants)]
    relations = []  # a relation's verb is a label ("is the rival of"): its names must be there
    for r in extraction.relations:
        missing = block.names("", [r.source, r.target])
        if missing:
            said = f"{r.source} {r.relation} {r.target}"
            g.dropped.append(
                f"relation {said!r}: names {', '.join(missing)}, absent from its block"
            )
        else:
            g.kept += 1
            relations.append(r)
    entities = []
    for ent in extraction.entities:
        if block.names("", [ent.name]):  # an entity the block never names is not of it
            g.dropped.append(f"entity {ent.name!r}: absent from its block")
            continue
        if ent.description and not keep("description", ent.description, [ent.name]):
            ent = ent.model_copy(update={"description": ""})
        entities.append(ent)
    out = extraction.model_copy(
        update={"facts": facts, "events": events, "relations": relations, "entities": entities}
    )
    return out, g
