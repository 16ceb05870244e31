"""What one block's asset call must return, and how a reply is checked item by item.

The reply is one JSON object with four lists (entities, relations, events, facts). It is read
tolerantly (``segment.validation.extract_json``) and checked strictly: each item on its own, so
one bad item costs that item, not the block; every name used in a relation, an event or a fact
must be one of the block's entities. The problems found are told to the LLM on a retry; what
survives the retries is kept item by item (``repaired``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from llama_index.core.bridge.pydantic import BaseModel, Field, ValidationError, field_validator

M = TypeVar("M", bound=BaseModel)

EntityType = Literal["person", "animal", "group", "place", "object"]
EventKind = Literal["event", "interaction", "scene"]

# Words a model uses for a type, mapped to the schema's (anything else is a problem).
_TYPE_WORDS: dict[str, str] = {
    "character": "person",
    "human": "person",
    "man": "person",
    "woman": "person",
    "people": "group",
    "dog": "animal",
    "creature": "animal",
    "organization": "group",
    "organisation": "group",
    "family": "group",
    "location": "place",
    "setting": "place",
    "thing": "object",
    "item": "object",
    "artifact": "object",
}
MAX_ENTITIES, MAX_RELATIONS, MAX_EVENTS, MAX_FACTS = 10, 8, 6, 10
MAX_TEXT = 200  # characters of a description, fact or summary
MIN_LETTERS = 3  # fewer: a placeholder ("...", "-", "N/A"), not a sentence


def _letters(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def _sentence(text: str) -> str:
    """Small models fill a required sentence with "..." when they have nothing: an item
    without a sentence is a problem (told on the retry), not an asset."""
    if _letters(text) < MIN_LETTERS:
        raise ValueError(f"{text!r} is a placeholder, not a sentence")
    return text


class Entity(BaseModel):
    """Someone or something the passage names."""

    name: str = Field(min_length=1, max_length=80, description="As the passage writes it, fullest.")
    type: EntityType = Field(description="person, animal, group, place or object.")
    description: str = Field(default="", max_length=MAX_TEXT, description="One short sentence.")

    @field_validator("description")
    @classmethod
    def _no_placeholder(cls, v: str) -> str:
        return v if _letters(v) >= MIN_LETTERS else ""  # optional: a placeholder is no text


class Relation(BaseModel):
    """A binary relation between two entities of the passage."""

    source: str = Field(min_length=1, max_length=80, description="An entity name.")
    relation: str = Field(min_length=1, max_length=60, description="A short verb phrase.")
    target: str = Field(min_length=1, max_length=80, description="An entity name.")


class Event(BaseModel):
    """Something that happens in the passage: an event, an interaction or a scene."""

    summary: str = Field(min_length=1, max_length=MAX_TEXT, description="One sentence.")
    kind: EventKind = Field(default="event", description="event, interaction or scene.")
    participants: list[str] = Field(default_factory=list, description="Entity names.")
    time: str = Field(default="", max_length=60, description="A time cue from the text, or ''.")

    _summary = field_validator("summary")(_sentence)


class Fact(BaseModel):
    """An atomic fact about one entity, as the passage states it."""

    entity: str = Field(min_length=1, max_length=80, description="An entity name.")
    fact: str = Field(min_length=1, max_length=MAX_TEXT, description="One short sentence.")

    _fact = field_validator("fact")(_sentence)


class BlockExtraction(BaseModel):
    """The assets of one block (what the LLM returns, after checking)."""

    entities: list[Entity] = Field(default_factory=list, max_length=MAX_ENTITIES)
    relations: list[Relation] = Field(default_factory=list, max_length=MAX_RELATIONS)
    events: list[Event] = Field(default_factory=list, max_length=MAX_EVENTS)
    facts: list[Fact] = Field(default_factory=list, max_length=MAX_FACTS)

    def items(self) -> int:
        return len(self.entities) + len(self.relations) + len(self.events) + len(self.facts)


def response_schema() -> dict[str, Any]:
    """The JSON schema of a reply, for servers that constrain decoding to it (llama.cpp's
    grammar, vLLM's structured outputs): lists and strings are bounded, so a small model cannot
    loop until ``max_tokens``."""
    return BlockExtraction.model_json_schema()


@dataclass
class CheckedExtraction:
    """The items of one reply that passed, and every problem found in the others."""

    extraction: BlockExtraction = field(default_factory=BlockExtraction)
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


def _norm(name: str) -> str:
    return " ".join(name.replace("’", "'").split()).lower().removeprefix("the ")


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ()))
    return f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg", "invalid"))


def _valid(
    obj: dict[str, Any],
    key: str,
    model: type[M],
    problems: list[str],
    limit: int,
    lower: str | None = None,
    words: dict[str, str] | None = None,
) -> Iterator[tuple[int, M]]:
    """The items of list ``key`` that ``model`` accepts, with their index; each rejected item
    (and a list that is no list or too long) adds one problem. ``lower``: a field whose text
    is compared case-blind (``type``, ``kind``), folded (and mapped through ``words``) before
    validation."""
    raw = obj.get(key, [])
    if raw is None:
        return
    if not isinstance(raw, list):
        problems.append(f'"{key}" must be a list')
        return
    if len(raw) > limit:
        problems.append(f'"{key}" has {len(raw)} items; at most {limit}')
    for k, item in enumerate(raw[:limit]):
        if lower and isinstance(item, dict) and isinstance(item.get(lower), str):
            word = item[lower].strip().lower()
            item = {**item, lower: (words or {}).get(word, word)}
        try:
            yield k, model.model_validate(item)
        except ValidationError as exc:
            problems.append(f"{key}[{k}]: {_first_error(exc)}")


def check_extraction(obj: dict[str, Any]) -> CheckedExtraction:
    """Check one parsed reply: each item against its model, every name against the entities."""
    out = CheckedExtraction()
    problems = out.problems
    known = {k: k in obj for k in ("entities", "relations", "events", "facts")}
    if not any(known.values()):
        problems.append('no "entities", "relations", "events" or "facts" list')
        return out
    names: set[str] = set()
    for _, ent in _valid(
        obj, "entities", Entity, problems, MAX_ENTITIES, lower="type", words=_TYPE_WORDS
    ):
        if _norm(ent.name) in names:
            continue  # the same entity listed twice: keep the first
        names.add(_norm(ent.name))
        out.extraction.entities.append(ent)

    def named(value: str, where: str) -> bool:
        if _norm(value) in names:
            return True
        problems.append(f"{where}: {value!r} is not one of the entities")
        return False

    for k, rel in _valid(obj, "relations", Relation, problems, MAX_RELATIONS):
        ok = named(rel.source, f"relations[{k}].source")
        if named(rel.target, f"relations[{k}].target") and ok:
            out.extraction.relations.append(rel)
    for k, ev in _valid(obj, "events", Event, problems, MAX_EVENTS, lower="kind"):
        kept = [p for p in ev.participants if named(p, f"events[{k}].participants")]
        out.extraction.events.append(ev.model_copy(update={"participants": kept}))
    for k, fact in _valid(obj, "facts", Fact, problems, MAX_FACTS):
        if named(fact.entity, f"facts[{k}].entity"):
            out.extraction.facts.append(fact)
    return out
