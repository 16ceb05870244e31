"""Derived assets: items, entity profiles, chapter outlines and plotlines, as LlamaIndex nodes.

From a book's per-block extractions (``assets.BookExtractions``) and its character index:

- every fact, event and relation becomes an item node, its names canonicalised (``canon``);
- per entity, a **profile snapshot** for each chapter in which something new is read about it,
  built from its items (and descriptions, and the links that merge it with another id) of that
  chapter and earlier ones only;
- per chapter, an **outline** from its events in reading order;
- per pair of characters who act together in two chapters or more, a **plotline** snapshot for
  each chapter that adds to it, from the events of that chapter and earlier ones.

Every node carries ``asset_type``, ``book_id``, ``entities``, ``chapter_from`` and
``chapter_index`` (the last chapter whose content it holds) and ``source_blocks`` /
``source_chapters``. So the store's spoiler filter (``chapter_index <= N``) is the whole of
spoiler safety: the profile "as of chapter N" is the latest snapshot with ``chapter_index <= N``,
and it was built from chapters 1..N only. Profiles are compiled from the facts, not written by an
LLM, so no call can leak a later chapter into them.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from llama_index.core.schema import TextNode

from litrag.narrative.assets import BookExtractions
from litrag.narrative.canon import Canonicalizer
from litrag.narrative.characters import CharacterIndex

AssetType = Literal["fact", "event", "relation", "entity_profile", "chapter_outline", "plotline"]
ASSET_KEYS = (
    "asset_type",
    "book_id",
    "entities",
    "chapter_from",
    "chapter_index",
    "source_blocks",
    "source_chapters",
    "name",
    "line_sources",
)
_NAMESPACE = uuid.UUID("3b2f7a61-0c4d-4e8f-9a1b-52c6d7e8f901")
MAX_PROFILE_FACTS, MAX_PROFILE_EVENTS, MAX_PROFILE_RELATIONS = 16, 8, 10
MAX_PLOTLINES = 20


@dataclass(frozen=True)
class Item:
    """One fact, event or relation read in one block, with canonical ids."""

    kind: Literal["fact", "event", "relation"]
    text: str
    entities: tuple[str, ...]
    chapter: int
    block: str
    order: tuple[int, int, int]
    time: str = ""


@dataclass(frozen=True)
class Link:
    """Two ids the LLM named as one ("Victor Frankenstein"), read in ``chapter``."""

    keep: str
    other: str
    chapter: int
    block: str
    name: str


@dataclass
class EntityInfo:
    id: str
    name: str
    type: str
    indexed: bool
    names: dict[str, int] = field(default_factory=dict)  # written name -> first chapter
    descriptions: list[tuple[int, str, str]] = field(default_factory=list)  # chapter, text, block


@dataclass
class Resolution:
    """A book's extractions with every name canonicalised."""

    items: list[Item]
    entities: dict[str, EntityInfo]
    links: list[Link]
    chapters: list[int]


def resolve(book: BookExtractions, canon: Canonicalizer) -> Resolution:
    """Canonical ids for every name of every block (in reading order)."""
    items: list[Item] = []
    entities: dict[str, EntityInfo] = {}
    links: list[Link] = []
    for rec in book.ordered():
        x = rec.extraction
        local: dict[str, tuple[str, ...]] = {}
        for ent in x.entities:
            r = canon.resolve(ent.name, ent.type)
            local[_key(ent.name)] = r.ids
            if r.how == "link":
                links.append(Link(r.ids[0], r.ids[1], rec.chapter, rec.block_id, ent.name))
            info = entities.get(r.id)
            if info is None:
                name = canon.name_of(r.id) or ent.name
                info = entities[r.id] = EntityInfo(r.id, name, ent.type, r.indexed)
            info.names.setdefault(ent.name, rec.chapter)
            if ent.description.strip():
                info.descriptions.append((rec.chapter, ent.description.strip(), rec.block_id))

        def ids(name: str, local: dict[str, tuple[str, ...]] = local) -> tuple[str, ...]:
            return local.get(_key(name)) or canon.resolve(name).ids

        def shown(cid: str) -> str:
            return entities[cid].name if cid in entities else cid

        base = (rec.chapter, rec.start)
        for k, f in enumerate(x.facts):
            items.append(
                Item(
                    "fact", f.fact.strip(), ids(f.entity)[:1], rec.chapter, rec.block_id, (*base, k)
                )
            )
        for k, e in enumerate(x.events):
            who = tuple(dict.fromkeys(i for p in e.participants for i in ids(p)[:1]))
            items.append(
                Item(
                    "event",
                    e.summary.strip(),
                    who,
                    rec.chapter,
                    rec.block_id,
                    (*base, 100 + k),
                    e.time.strip(),
                )
            )
        for k, rel in enumerate(x.relations):
            a, b = ids(rel.source)[0], ids(rel.target)[0]
            text = f"{shown(a)} {rel.relation.strip()} {shown(b)}"
            items.append(
                Item("relation", text, (a, b), rec.chapter, rec.block_id, (*base, 200 + k))
            )
    chapters = sorted({r.chapter for r in book.blocks.values()})
    return Resolution(items, entities, links, chapters)


def _key(name: str) -> str:
    return " ".join(name.replace("’", "'").split()).lower().removeprefix("the ")


class _Groups:
    """Union-find of ids over the links read up to a chapter."""

    def __init__(self, links: Iterable[Link], rank: Mapping[str, int]) -> None:
        self.parent: dict[str, str] = {}
        self.rank = rank
        for link in links:
            self.union(link.keep, link.other)

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        keep, other = sorted((ra, rb), key=lambda i: (-self.rank.get(i, 0), i))
        self.parent[other] = keep

    def members(self, ids: Iterable[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for i in ids:
            out[self.find(i)].add(i)
        return out


def _node(
    book_id: str,
    asset_type: AssetType,
    key: str,
    text: str,
    entities: Iterable[str],
    chapter_from: int,
    chapter_to: int,
    blocks: Iterable[tuple[int, str]],
    name: str = "",
) -> TextNode:
    src = sorted(set(blocks))
    node = TextNode(
        id_=str(uuid.uuid5(_NAMESPACE, f"{book_id}:{asset_type}:{key}:{chapter_to}")),
        text=text,
        metadata={
            "asset_type": asset_type,
            "book_id": book_id,
            "entities": list(dict.fromkeys(entities)),
            "chapter_from": chapter_from,
            "chapter_index": chapter_to,
            "source_blocks": list(dict.fromkeys(b for _, b in src)),
            "source_chapters": sorted({c for c, _ in src}),
            "name": name,
        },
    )
    node.excluded_embed_metadata_keys = list(ASSET_KEYS)
    node.excluded_llm_metadata_keys = [k for k in ASSET_KEYS if k not in ("asset_type", "name")]
    return node


def build_nodes(
    book: BookExtractions,
    index: CharacterIndex | None,
    chapter_titles: Mapping[int, str] | None = None,
    res: Resolution | None = None,
) -> list[TextNode]:
    """Every derived asset of a book as nodes (items, profiles, outlines, plotlines)."""
    res = res or resolve(book, Canonicalizer(index))
    rank = {c.id: c.mentions() for c in index.characters} if index is not None else {}
    nodes: list[TextNode] = []
    for it in res.items:
        nodes.append(
            _node(
                book.book_id,
                it.kind,
                f"{it.block}:{it.order[2]}",
                _item_text(it, res),
                it.entities,
                it.chapter,
                it.chapter,
                [(it.chapter, it.block)],
            )
        )
    nodes += _profiles(book.book_id, res, rank)
    nodes += _outlines(book.book_id, res, chapter_titles or {})
    nodes += _plotlines(book.book_id, res, rank)
    return nodes


def _item_text(it: Item, res: Resolution) -> str:
    if it.kind == "fact" and it.entities:
        who = res.entities.get(it.entities[0])
        return f"{who.name if who else it.entities[0]}: {it.text}"
    if it.kind == "event":
        return f"{it.text}{f' ({it.time})' if it.time else ''}"
    return it.text


def _profiles(book_id: str, res: Resolution, rank: Mapping[str, int]) -> list[TextNode]:
    by_entity: dict[str, list[Item]] = defaultdict(list)
    for it in res.items:
        for e in it.entities:
            by_entity[e].append(it)
    out: list[TextNode] = []
    for c in res.chapters:
        groups = _Groups([lk for lk in res.links if lk.chapter <= c], rank)
        touched = {e for it in res.items if it.chapter == c for e in it.entities}
        touched |= {
            e for e, inf in res.entities.items() if any(d[0] == c for d in inf.descriptions)
        }
        touched |= {i for lk in res.links if lk.chapter == c for i in (lk.keep, lk.other)}
        linked = {i for lk in res.links for i in (lk.keep, lk.other)}
        for root, members in groups.members(set(res.entities) | linked).items():
            if not members & touched or not members & set(res.entities):
                continue
            items = sorted(
                {it for m in members for it in by_entity.get(m, []) if it.chapter <= c},
                key=lambda it: it.order,
            )
            descs = [
                d
                for m in members
                if m in res.entities
                for d in res.entities[m].descriptions
                if d[0] <= c
            ]
            if not items and not descs:
                continue
            links = [lk for lk in res.links if lk.chapter <= c and lk.keep in members]
            if root not in res.entities:  # the kept id of a link was never named alone
                root = min(members & set(res.entities), key=lambda m: (-rank.get(m, 0), m))
            text, cites = _profile_text(res, root, members, items, descs, links, c)
            blocks = [(it.chapter, it.block) for it in items] + [(d[0], d[2]) for d in descs]
            blocks += [(lk.chapter, lk.block) for lk in links]
            first = min(ch for ch, _ in blocks)
            ids = [root, *sorted(members - {root})]
            node = _node(
                book_id,
                "entity_profile",
                root,
                text,
                ids,
                first,
                c,
                blocks,
                name=res.entities[root].name,
            )
            node.metadata["line_sources"] = cites
            out.append(node)
    return out


def _profile_text(
    res: Resolution,
    root: str,
    members: set[str],
    items: list[Item],
    descs: list[tuple[int, str, str]],
    links: list[Link],
    upto: int,
) -> tuple[str, list[list[int | str]]]:
    """The profile's text, and ``[line, block]`` for each line that says what one block read
    (description, link, fact, relation, event): the citation a reader can follow."""
    info = res.entities[root]
    cites: list[list[int | str]] = []
    known = [res.entities[m] for m in members if m in res.entities]
    names = sorted({n for e in known for n, ch in e.names.items() if ch <= upto})
    names = sorted(set(names) | {e.name for e in known})
    lines = [f"{info.name} ({info.type}), as of chapter {upto}."]
    if len(names) > 1:
        lines.append("Also named: " + ", ".join(n for n in names if n != info.name) + ".")
    for lk in links:
        cites.append([len(lines), lk.block])
        lines.append(f"Read as one person from chapter {lk.chapter}: {lk.name}.")
    if descs:
        first = sorted(descs)[0]
        cites.append([len(lines), first[2]])
        lines.append(first[1])
    for head, kind, cap in (
        ("Facts:", "fact", MAX_PROFILE_FACTS),
        ("Relations:", "relation", MAX_PROFILE_RELATIONS),
        ("Events:", "event", MAX_PROFILE_EVENTS),
    ):
        shown = _dedupe(it for it in items if it.kind == kind)[-cap:]
        if shown:
            lines.append(head)
        for it in shown:
            cites.append([len(lines), it.block])
            lines.append(f"- (ch. {it.chapter}) {it.text}")
    return "\n".join(lines), cites


def _dedupe(items: Iterable[Item]) -> list[Item]:
    seen: set[str] = set()
    out = []
    for it in items:
        k = it.text.lower()
        if k not in seen:
            seen.add(k)
            out.append(it)
    return out


def _outlines(book_id: str, res: Resolution, titles: Mapping[int, str]) -> list[TextNode]:
    events: dict[int, list[Item]] = defaultdict(list)
    for it in res.items:
        if it.kind == "event":
            events[it.chapter].append(it)
    out = []
    for c, evs in sorted(events.items()):
        evs.sort(key=lambda it: it.order)
        head = f"Chapter {c}" + (f": {titles[c]}" if titles.get(c) else "") + ", outline."
        lines = [head]
        for it in _dedupe(evs):
            who = ", ".join(res.entities[e].name for e in it.entities if e in res.entities)
            extra = "; ".join(x for x in (who, it.time) if x)
            lines.append(f"- {it.text}" + (f" ({extra})" if extra else ""))
        ents = [e for it in evs for e in it.entities]
        out.append(
            _node(
                book_id,
                "chapter_outline",
                f"ch{c}",
                "\n".join(lines),
                ents,
                c,
                c,
                [(it.chapter, it.block) for it in evs],
                name=f"chapter {c}",
            )
        )
    return out


def _plotlines(book_id: str, res: Resolution, rank: Mapping[str, int]) -> list[TextNode]:
    """Pairs of characters acting together in two chapters or more, a snapshot per chapter."""
    people = {e for e, info in res.entities.items() if info.type in ("person", "animal")}
    out: list[TextNode] = []
    pair_events: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for c in res.chapters:
        groups = _Groups([lk for lk in res.links if lk.chapter <= c], rank)
        for it in res.items:
            if it.kind != "event" or it.chapter != c:
                continue
            roots = sorted({groups.find(e) for e in it.entities if e in people})
            for i, a in enumerate(roots):
                for b in roots[i + 1 :]:
                    pair_events[(a, b)].append(it)
    ranked = sorted(
        (p for p, evs in pair_events.items() if len({it.chapter for it in evs}) >= 2),
        key=lambda p: (-len(pair_events[p]), p),
    )[:MAX_PLOTLINES]
    for a, b in ranked:
        evs = sorted(pair_events[(a, b)], key=lambda it: it.order)
        for c in sorted({it.chapter for it in evs}):
            upto = _dedupe(it for it in evs if it.chapter <= c)
            na, nb = res.entities[a].name, res.entities[b].name
            lines = [f"Plotline: {na} and {nb}, as of chapter {c}."]
            lines += [f"- (ch. {it.chapter}) {it.text}" for it in upto]
            out.append(
                _node(
                    book_id,
                    "plotline",
                    f"{a}+{b}",
                    "\n".join(lines),
                    [a, b],
                    upto[0].chapter,
                    c,
                    [(it.chapter, it.block) for it in upto],
                    name=f"{na} and {nb}",
                )
            )
    return out
