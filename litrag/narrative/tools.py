"""Narrative tools: what a reader can ask beyond one passage, each kept to the spoiler limit.

``NarrativeTools`` answers six kinds of lookup for one book: passages for a query, a character's
profile and timeline, a chapter's outline, the events between two chapters, two characters'
plotline. Each returns a ``ToolOutput``: the text an answering LLM reads (a profile snapshot, an
outline, ...) and the stored plot blocks behind it (``sources``), fetched from the block store by
the ids in the assets' ``source_blocks`` and never past the spoiler limit.

The limit of a call is the smaller of its own ``upto_chapter`` and the session's: an LLM calling
a tool with a later chapter still gets nothing later. Names go through the book's character
index as the reader knows it by then (aliases first used later are not known yet), and through
the same canonical ids the LLM assets carry (``canon.Canonicalizer``).

Where the book has no LLM assets (``litrag assets`` was not run), each tool falls back to what
the offline index and the block store hold, and says so in ``ToolOutput.note``: a character's
tools give passages steered by the index (``character_passages``: the blocks where the character
is introduced and those naming it most, best first in ``ToolOutput.ranked``), two characters'
the blocks naming both (``pair_passages``), a chapter's its own blocks. The text beside them is
what the index knows (the name, its other forms, the chapter it is first named in), never counts
standing in for an answer: the answer is read from the passages.
``as_tools()`` wraps the six as LlamaIndex ``FunctionTool`` for an agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llama_index.core.schema import BaseNode, NodeWithScore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from litrag.answering.ahead import asks_for_ending
from litrag.answering.answer import format_chunk
from litrag.narrative.asset_store import AssetStore
from litrag.narrative.canon import Canonicalizer
from litrag.narrative.characters import Character, CharacterIndex
from litrag.narrative.router import fold
from litrag.retrieval.retriever import BookRetriever, book_filters, character_filters, within_limit

TOOL_NAMES = (
    "search_passages",
    "character_profile",
    "character_timeline",
    "chapter_outline",
    "events_between",
    "plotline",
)
MAX_TIMELINE = 40  # lines of a timeline: the first and last halves when there are more
MAX_OUTLINE_LINES = 60  # lines of several chapters' outlines together
MAX_FALLBACK_SOURCES = 12  # blocks of a chapter range, spread evenly, when there are no assets
TOOL_PASSAGES = 6  # passages a tool's text for an agent carries (spread evenly)
NO_ASSETS = "this book has no LLM-built assets (run: litrag assets BOOK)"
FIRST_MENTIONS = 2  # blocks where a character is introduced, steering a passage answer
MOST_NAMED = 3  # blocks naming a character most (or, for a story, the most of each chapter)


def story_key(nws: NodeWithScore) -> tuple[int, int, int]:
    m = nws.node.metadata
    start = nws.node.start_char_idx or 0
    return (int(m.get("chapter_index", 0)), int(m.get("sentence_from", 0)), start)


def spread(items: Sequence[Any], n: int) -> list[Any]:
    """At most ``n`` of ``items``, evenly spaced, first and last kept, order kept.

    Why: an outline's or a profile's blocks run through chapters; an even spread shows the whole
    span rather than its start.
    """
    if n <= 0:
        return []
    if len(items) <= n:
        return list(items)
    if n == 1:
        return [items[0]]
    picks = dict.fromkeys(round(i * (len(items) - 1) / (n - 1)) for i in range(n))
    return [items[i] for i in picks]


@dataclass
class ToolOutput:
    """What one narrative tool returned: the text to read and the blocks behind it."""

    tool: str
    args: dict[str, Any]
    text: str
    sources: list[NodeWithScore]  # stored plot blocks, reading order, none past the limit
    found: bool
    upto_chapter: int | None = None  # the limit this call obeyed
    note: str = ""  # how the tool degraded, when it did
    asset_ids: list[str] = field(default_factory=list)  # asset nodes the text came from
    # passages steered by the character index (no assets): the sources, best first; an answer
    # is read from these, the text beside them is only what the index knows
    ranked: list[NodeWithScore] = field(default_factory=list)

    def passages(self, n: int = TOOL_PASSAGES) -> list[NodeWithScore]:
        """The sources an agent reads with the text: ``n`` spread over the reading order."""
        return spread(self.sources, n)

    def __str__(self) -> str:
        """The tool's reply as a function-calling LLM reads it (FunctionTool's content)."""
        parts = [self.text]
        if self.note:
            parts.append(f"(Note: {self.note}.)")
        chunks = [format_chunk(n) for n in self.passages()]
        if chunks:
            parts.append("Passages:\n" + "\n\n".join(chunks))
        return "\n\n".join(parts)


@dataclass(frozen=True)
class _Who:
    """A name resolved as of the limit: canonical ids (first the kept one) and how it reads."""

    ids: tuple[str, ...]
    name: str
    character: Character | None


def _int(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a chapter number, got {value!r}") from None


class NarrativeTools:
    """The narrative tools of one book for one reader (one spoiler limit)."""

    def __init__(
        self,
        book_id: str,
        *,
        assets: AssetStore | None,
        blocks: BookRetriever,
        index: CharacterIndex | None,
        upto_chapter: int | None,
    ) -> None:
        self.book_id = book_id
        self.assets = assets
        self.blocks = blocks
        self.index = index
        self.upto_chapter = upto_chapter
        self._has_assets: bool | None = None

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def has_assets(self) -> bool:
        """True when the asset store holds this book's assets (checked once)."""
        if self._has_assets is None:
            self._has_assets = self.assets is not None and self.assets.has_book(self.book_id)
        return self._has_assets

    def limit(self, upto_chapter: Any = None) -> int | None:
        """The smaller of the call's limit and the session's (None: no limit)."""
        limits = [x for x in (upto_chapter, self.upto_chapter) if x is not None]
        return min(_int(x, "upto_chapter") for x in limits) if limits else None

    def _met(self, limit: int | None) -> CharacterIndex | None:
        """The index as a reader at ``limit`` knows it: later characters and aliases cut."""
        if self.index is None:
            return None
        return CharacterIndex(
            book_id=self.index.book_id, model=self.index.model, characters=self.index.upto(limit)
        )

    def resolve(self, name: str, upto_chapter: int | None = None) -> _Who | None:
        """The character (or asset entity) ``name`` stands for, as of the limit; None when the
        reader has not met it."""
        limit = self.limit(upto_chapter)
        met = self._met(limit)
        canon = Canonicalizer(met)
        r = canon.resolve(name)
        if not r.indexed and fold(name) != name:  # "François" for the text's "Francois"
            r = canon.resolve(fold(name))
        if met is not None and r.indexed:
            c = met.by_id(r.id)
            if c is not None:
                return _Who(r.ids, c.name, c)
        if self.has_assets and self.assets is not None:
            node = self.assets.profile(self.book_id, r.id, limit)
            if node is not None:
                return _Who(r.ids, str(node.metadata.get("name") or name), None)
        return None

    def name_forms(self, name: str, upto_chapter: int | None = None) -> list[str]:
        """The ways the reader has seen a character written by the limit (name, aliases)."""
        who = self.resolve(name, upto_chapter)
        if who is None:
            return []
        return list(dict.fromkeys([who.name, *(who.character.aliases if who.character else [])]))

    def _retriever(self, limit: int | None, ids: Sequence[str] = (), every: bool = False):
        if limit == self.blocks.upto_chapter and not ids:
            return self.blocks
        return BookRetriever(
            self.blocks.vector_store,
            self.blocks.embed_model,
            self.book_id,
            upto_chapter=limit,
            settings=self.blocks.settings,
            reranker=self.blocks.reranker,
            characters=list(ids),
            every_character=every,
            children_store=self.blocks.children_store,
        )

    def _by_id(self, ids: Sequence[str], limit: int | None) -> list[NodeWithScore]:
        """Stored blocks by node id, this book only and none past the limit, reading order."""
        wanted = list(dict.fromkeys(i for i in ids if i))
        if not wanted:
            return []
        nodes = self.blocks.vector_store.get_nodes(node_ids=wanted)
        kept = [
            NodeWithScore(node=n, score=None)
            for n in nodes
            if n.metadata.get("book_id") == self.book_id and within_limit(n, limit)
        ]
        return sorted(kept, key=story_key)

    def _behind(self, assets: Sequence[BaseNode], limit: int | None) -> list[NodeWithScore]:
        return self._by_id(
            [b for a in assets for b in a.metadata.get("source_blocks") or []], limit
        )

    def _from_assets(
        self,
        tool: str,
        args: dict[str, Any],
        text: str,
        used: Sequence[BaseNode],
        limit: int | None,
        sources: list[NodeWithScore] | None = None,
    ) -> ToolOutput:
        """What a tool found in the LLM assets: their text, the blocks behind them, their ids."""
        if sources is None:
            sources = self._behind(used, limit)
        ids = [n.node_id for n in used]
        return ToolOutput(tool, args, text, sources, True, limit, asset_ids=ids)

    def _chapter_blocks(
        self, first: int, last: int, ids: Sequence[str] = (), every: bool = False
    ) -> list[NodeWithScore]:
        flt = book_filters([self.book_id])
        flt = MetadataFilters(
            filters=[
                flt,
                MetadataFilter(key="chapter_index", value=first, operator=FilterOperator.GTE),
                MetadataFilter(key="chapter_index", value=last, operator=FilterOperator.LTE),
            ]
        )
        flt = character_filters(flt, list(ids), every)
        nodes = self.blocks.vector_store.get_nodes(filters=flt)
        return sorted((NodeWithScore(node=n, score=None) for n in nodes), key=story_key)

    def _search(
        self, query: str, limit: int | None, ids: Sequence[str] = (), every: bool = False
    ) -> list[NodeWithScore]:
        return self._retriever(limit, ids, every).retrieve(query)

    def _naming(
        self, ids: Sequence[str], limit: int | None, every: bool = False
    ) -> list[NodeWithScore]:
        """The blocks whose ``characters`` payload names one of ``ids`` (each, with ``every``),
        within the limit, in reading order."""
        flt = book_filters([self.book_id], limit)
        nodes = self.blocks.vector_store.get_nodes(filters=character_filters(flt, ids, every))
        kept = (NodeWithScore(node=n, score=None) for n in nodes if within_limit(n, limit))
        return sorted(kept, key=story_key)

    def _named_in(self, ids: Sequence[str], nws: NodeWithScore) -> int:
        """How often the index finds one of ``ids`` named in the block's own text."""
        start, end, ch = nws.node.start_char_idx, nws.node.end_char_idx, nws.node.metadata
        if self.index is None or start is None or end is None:
            return 0
        return self.index.named_in(ids, int(ch.get("chapter_index", 0)), start, end)

    def _steered(
        self,
        who: _Who,
        limit: int | None,
        query: str | None,
        story: bool = False,
        ending: bool = False,
    ) -> list[NodeWithScore]:
        """Passages about a character, best first: where it is introduced (its first blocks),
        where it is named most (for ``story``: each chapter's most, first), then the hybrid
        retrieval of ``query`` (of its names, kept to its blocks, without one)."""
        naming = self._naming(who.ids, limit)
        count = {n.node.node_id: self._named_in(who.ids, n) for n in naming}
        firsts = naming[:FIRST_MENTIONS]
        by_count = sorted(naming, key=lambda n: -count[n.node.node_id])  # stable: reading order
        if story:
            best: dict[int, NodeWithScore] = {}
            for n in by_count:
                best.setdefault(int(n.node.metadata.get("chapter_index", 0)), n)
            most = sorted(best.values(), key=story_key)
        else:
            most = by_count[:MOST_NAMED]
        if query:
            found = self._search(query, limit)
        else:
            names = [who.name, *(who.character.aliases if who.character else [])]
            found = self._search(" ".join(dict.fromkeys(names)), limit, who.ids[:1])
        ranked: dict[str, NodeWithScore] = {}
        # A story reads each chapter first (its opening blocks would fill a budget); asked about
        # its end, the last block naming the character leads, read whole by the engine.
        last = naming[-1:] if story and ending else []
        for n in [*last, *most, *firsts, *found] if story else [*firsts, *most, *found]:
            ranked.setdefault(n.node.node_id, n)
        return list(ranked.values())

    def _known(self, who: _Who, limit: int | None) -> str:
        """What the offline index says of a character up to the limit, beside passages: its
        name, its other forms, the chapter it is first named in (no counts)."""
        c = who.character
        if c is None or self.index is None:
            return f"{who.name}."
        met = self._met(limit)
        assert met is not None
        cut = met.by_id(c.id) or c
        lines = [f"{cut.name}: first named in chapter {cut.first_chapter}."]
        others = [a for a in cut.aliases if a != cut.name]
        if others:
            lines.append("Also named: " + ", ".join(others) + ".")
        return "\n".join(lines)

    @staticmethod
    def _upto(limit: int | None) -> str:
        return f" up to chapter {limit}" if limit is not None else ""

    def _unknown(self, tool: str, args: dict[str, Any], name: str, limit: int | None):
        how = (
            "no character index and no assets for this book"
            if self.index is None and not self.has_assets
            else f"nobody named {name!r} is met{self._upto(limit)}"
        )
        return ToolOutput(tool, args, f"No character {name!r} found: {how}.", [], False, limit)

    # -- the tools --------------------------------------------------------------------------
    def search_passages(self, query: str) -> ToolOutput:
        """The blocks the hybrid retriever finds for ``query``, within the session's limit."""
        limit = self.limit()
        found = self._search(query, limit)
        text = f"{len(found)} passages found for: {query}" if found else "No passage matches."
        return ToolOutput("search_passages", {"query": query}, text, found, bool(found), limit)

    def character_profile(self, name: str, upto_chapter: int | None = None) -> ToolOutput:
        """Who a character is as of the limit: the LLM-built profile snapshot and its blocks."""
        limit = self.limit(upto_chapter)
        args = {"name": name, "upto_chapter": limit}
        who = self.resolve(name, limit)
        if who is None:
            return self._unknown("character_profile", args, name, limit)
        node = None
        if self.has_assets and self.assets is not None:
            for cid in who.ids:
                node = self.assets.profile(self.book_id, cid, limit)
                if node is not None:
                    break
        if node is not None:
            return self._from_assets("character_profile", args, node.get_content(), [node], limit)
        note = NO_ASSETS if not self.has_assets else f"no LLM-built profile of {who.name}"
        out = self.character_passages(who.name, upto_chapter=limit)
        return replace(out, tool="character_profile", args=args, note=note)

    def character_timeline(self, name: str, upto_chapter: int | None = None) -> ToolOutput:
        """A character's chapter-stamped facts and events in reading order, up to the limit."""
        limit = self.limit(upto_chapter)
        args = {"name": name, "upto_chapter": limit}
        who = self.resolve(name, limit)
        if who is None:
            return self._unknown("character_timeline", args, name, limit)
        items: dict[str, BaseNode] = {}
        if self.has_assets and self.assets is not None:
            members = list(who.ids)
            profile = self.assets.profile(self.book_id, who.ids[0], limit)
            if profile is not None:  # linked ids read as one by then
                members += [e for e in profile.metadata.get("entities") or [] if e not in members]
            for kind in ("fact", "event"):
                for cid in members:
                    for n in self.assets.get(self.book_id, kind, entity=cid, upto_chapter=limit):
                        items.setdefault(n.node_id, n)
        if items:
            sources = self._behind(list(items.values()), limit)
            where = {s.node.node_id: story_key(s) for s in sources}

            def order(n: BaseNode) -> tuple[Any, ...]:
                blocks = n.metadata.get("source_blocks") or [""]
                at = where.get(blocks[0], (int(n.metadata.get("chapter_index", 0)), 0, 0))
                return (*at, n.metadata.get("asset_type") != "event", n.node_id)

            ordered = sorted(items.values(), key=order)
            lines = [
                f"- (ch. {n.metadata.get('chapter_index')}) {n.get_content()}" for n in ordered
            ]
            if len(lines) > MAX_TIMELINE:
                half = MAX_TIMELINE // 2
                gap = f"- ... ({len(lines) - 2 * half} more)"
                lines = [*lines[:half], gap, *lines[-half:]]
            first = who.character.first_chapter if who.character else None
            head = f"Timeline of {who.name}{self._upto(limit)}"
            head += f" (first named in chapter {first})." if first else "."
            text = "\n".join([head, *lines])
            return self._from_assets("character_timeline", args, text, ordered, limit, sources)
        note = NO_ASSETS if not self.has_assets else f"no LLM-built facts or events of {who.name}"
        out = self.character_passages(who.name, upto_chapter=limit, story=True)
        return replace(out, tool="character_timeline", args=args, note=note)

    def chapter_outline(self, chapter: int) -> ToolOutput:
        """What happens in one chapter: its LLM-built outline (events in reading order)."""
        chapter = _int(chapter, "chapter")
        limit = self.limit()
        args = {"chapter": chapter}
        if limit is not None and chapter > limit:
            text = f"Chapter {chapter} is past the reader's spoiler limit (chapter {limit})."
            return ToolOutput("chapter_outline", args, text, [], False, limit)
        node = None
        if self.has_assets and self.assets is not None:
            node = self.assets.outline(self.book_id, chapter, limit)
        if node is not None:
            return self._from_assets("chapter_outline", args, node.get_content(), [node], limit)
        blocks = self._chapter_blocks(chapter, chapter)
        if not blocks:
            return ToolOutput("chapter_outline", args, f"No chapter {chapter}.", [], False, limit)
        note = NO_ASSETS if not self.has_assets else f"no LLM-built outline of chapter {chapter}"
        title = str(blocks[0].node.metadata.get("chapter_title") or f"Chapter {chapter}")
        chosen = spread(blocks, MAX_FALLBACK_SOURCES)
        text = (
            f"{title} (chapter {chapter}): {len(chosen)} of its {len(blocks)} passages follow, "
            "in reading order."
        )
        return ToolOutput("chapter_outline", args, text, chosen, True, limit, note)

    def events_between(
        self, chapter_from: int, chapter_to: int, name: str | None = None
    ) -> ToolOutput:
        """What happens from one chapter to another (to a character, when ``name`` is given)."""
        a, b = sorted((_int(chapter_from, "chapter_from"), _int(chapter_to, "chapter_to")))
        limit = self.limit()
        b = min(b, limit) if limit is not None else b
        args: dict[str, Any] = {"chapter_from": a, "chapter_to": b, "name": name}
        if a > b:
            text = f"Chapter {a} is past the reader's spoiler limit (chapter {limit})."
            return ToolOutput("events_between", args, text, [], False, limit)
        who = self.resolve(name, limit) if name else None
        if name and who is None:
            return self._unknown("events_between", args, name, limit)
        span = f"chapters {a}-{b}" if a != b else f"chapter {b}"
        used: list[BaseNode] = []
        text = ""
        if self.has_assets and self.assets is not None:
            if who is not None:
                evs: dict[str, BaseNode] = {}
                for cid in who.ids:
                    for n in self.assets.get(self.book_id, "event", entity=cid, upto_chapter=b):
                        if int(n.metadata.get("chapter_index", 0)) >= a:
                            evs.setdefault(n.node_id, n)
                used = sorted(evs.values(), key=lambda n: n.metadata.get("chapter_index", 0))
                lines = [f"- (ch. {n.metadata['chapter_index']}) {n.get_content()}" for n in used]
                text = "\n".join([f"Events of {who.name}, {span}:", *lines])
            else:
                used = [
                    n
                    for n in self.assets.get(self.book_id, "chapter_outline", upto_chapter=b)
                    if int(n.metadata.get("chapter_index", 0)) >= a
                ]
                per = max(3, MAX_OUTLINE_LINES // max(len(used), 1))
                parts = []
                for n in used:
                    lines = n.get_content().splitlines()
                    cut = [*lines[: per + 1], "- ..."] if len(lines) > per + 1 else lines
                    parts.append("\n".join(cut))
                text = "\n\n".join(parts)
        if used:
            return self._from_assets("events_between", args, text, used, limit)
        ids = who.ids[:1] if who is not None else ()
        blocks = self._chapter_blocks(a, b, ids)
        if not blocks:
            return ToolOutput("events_between", args, f"Nothing found in {span}.", [], False, limit)
        note = NO_ASSETS if not self.has_assets else f"no LLM-built events for {span}"
        titles = dict.fromkeys(
            f"Chapter {n.node.metadata.get('chapter_index')}: "
            f"{n.node.metadata.get('chapter_title') or ''}".rstrip(": ")
            for n in blocks
        )
        chosen = spread(blocks, MAX_FALLBACK_SOURCES)
        about = f" naming {who.name}" if who is not None else ""
        text = (
            f"{span.capitalize()}:\n" + "\n".join(titles) + f"\n{len(chosen)} of the "
            f"{len(blocks)} passages{about} follow, spread evenly, in reading order."
        )
        return ToolOutput("events_between", args, text, chosen, True, limit, note)

    def plotline(self, name_a: str, name_b: str) -> ToolOutput:
        """How two characters' story goes together up to the limit: their plotline snapshot,
        the events they share and the relations read between them."""
        limit = self.limit()
        args = {"name_a": name_a, "name_b": name_b}
        who_a, who_b = self.resolve(name_a, limit), self.resolve(name_b, limit)
        for who, name in ((who_a, name_a), (who_b, name_b)):
            if who is None:
                return self._unknown("plotline", args, name, limit)
        assert who_a is not None and who_b is not None
        if who_a.ids[0] == who_b.ids[0]:
            text = f"{name_a!r} and {name_b!r} are one character ({who_a.name})."
            return ToolOutput("plotline", args, text, [], False, limit)
        a_ids, b_ids = set(who_a.ids), set(who_b.ids)
        used: list[BaseNode] = []
        text = ""
        if self.has_assets and self.assets is not None:

            def shared(kind: str) -> list[BaseNode]:
                out: dict[str, BaseNode] = {}
                for cid in a_ids:
                    for n in self.assets.get(self.book_id, kind, entity=cid, upto_chapter=limit):
                        if b_ids & set(n.metadata.get("entities") or []):
                            out.setdefault(n.node_id, n)
                return sorted(out.values(), key=lambda n: n.metadata.get("chapter_index", 0))

            lines: list[str] = []
            plots = shared("plotline")
            if plots:
                used.append(plots[-1])  # the latest snapshot the limit lets through
                lines.append(plots[-1].get_content())
            else:
                events = shared("event")
                used += events
                if events:
                    lines.append(f"Plotline: {who_a.name} and {who_b.name}{self._upto(limit)}.")
                    lines += [
                        f"- (ch. {n.metadata['chapter_index']}) {n.get_content()}" for n in events
                    ]
            rels = shared("relation")
            if rels:
                used += rels
                lines.append("Relations:")
                lines += [f"- (ch. {n.metadata['chapter_index']}) {n.get_content()}" for n in rels]
            text = "\n".join(lines)
        if used:
            return self._from_assets("plotline", args, text, used, limit)
        note = NO_ASSETS if not self.has_assets else "no LLM-built plotline of the two"
        out = self.pair_passages(who_a.name, who_b.name)
        return replace(out, tool="plotline", args=args, note=note)

    # -- passages steered by the character index (what a character's tools give without assets)
    def character_passages(
        self,
        name: str,
        query: str | None = None,
        upto_chapter: int | None = None,
        story: bool = False,
    ) -> ToolOutput:
        """The book's passages about a character, as of the limit, best first in ``ranked``:
        where it is introduced, where it is named most (for ``story``: the block naming it
        most in each chapter, for its arc), then the hybrid retrieval of ``query``."""
        limit = self.limit(upto_chapter)
        args: dict[str, Any] = {"name": name, "query": query, "upto_chapter": limit, "story": story}
        ending = story and bool(query) and asks_for_ending(query or "")  # the engine reads it
        args |= {"ending": True} if ending else {}
        who = self.resolve(name, limit)
        if who is None:
            return self._unknown("character_passages", args, name, limit)
        ranked = self._steered(who, limit, query, story, ending)
        if not ranked:
            text = f"No passage names {who.name}{self._upto(limit)}."
            return ToolOutput("character_passages", args, text, [], False, limit)
        where = "in order, where" if story else "where"
        text = (
            f"{self._known(who, limit)}\nThe passages below are {where} the book introduces "
            f"{who.name} and names {who.name} most."
        )
        sources = sorted(ranked, key=story_key)
        return ToolOutput("character_passages", args, text, sources, True, limit, ranked=ranked)

    def pair_passages(self, name_a: str, name_b: str, query: str | None = None) -> ToolOutput:
        """Passages naming both characters, up to the limit, best first in ``ranked``: the
        first ones, those naming the two most (the fewer of their mentions), then the hybrid
        retrieval of ``query`` (of both names, kept to blocks naming both, without one)."""
        limit = self.limit()
        args = {"name_a": name_a, "name_b": name_b, "query": query}
        who_a, who_b = self.resolve(name_a, limit), self.resolve(name_b, limit)
        for who, name in ((who_a, name_a), (who_b, name_b)):
            if who is None:
                return self._unknown("pair_passages", args, name, limit)
        assert who_a is not None and who_b is not None
        both = [who_a.ids[0], who_b.ids[0]]
        naming = self._naming(both, limit, every=True)
        together = f"{who_a.name} and {who_b.name}"
        if not naming:
            text = f"{together} are not named in one passage{self._upto(limit)}."
            return ToolOutput("pair_passages", args, text, [], False, limit)

        def fewer(n: NodeWithScore) -> int:
            return -min(self._named_in(who_a.ids, n), self._named_in(who_b.ids, n))

        if query:
            found = self._search(query, limit)
        else:
            found = self._search(f"{who_a.name} {who_b.name}", limit, both, every=True)
        ranked: dict[str, NodeWithScore] = {}
        for n in [*naming[:FIRST_MENTIONS], *sorted(naming, key=fewer)[:MOST_NAMED], *found]:
            ranked.setdefault(n.node.node_id, n)
        text = (
            f"{self._known(who_a, limit)}\n{self._known(who_b, limit)}\nThe passages below "
            f"are where the book first names {together} together, and names the two most."
        )
        best = list(ranked.values())
        sources = sorted(best, key=story_key)
        return ToolOutput("pair_passages", args, text, sources, True, limit, ranked=best)

    # -- for an agent -----------------------------------------------------------------------
    def run(self, tool: str, kwargs: dict[str, Any]) -> ToolOutput:
        """Call a tool by name (what a router chose)."""
        if tool not in TOOL_NAMES:
            raise ValueError(f"no narrative tool {tool!r}: use one of {', '.join(TOOL_NAMES)}")
        return getattr(self, tool)(**kwargs)

    def as_tools(self) -> list[Any]:
        """The six tools as LlamaIndex ``FunctionTool``; each returns its ``ToolOutput`` (the
        LLM reads ``str()`` of it, the caller gets it as ``raw_output``)."""
        from llama_index.core.tools import FunctionTool

        limit = self.limit()
        seen = (
            f" The reader has read up to chapter {limit}: nothing later is ever returned."
            if limit is not None
            else ""
        )
        docs = {
            "search_passages": "Find the passages of the book that best match a query (a "
            "question or keywords). Use it for specific details: who did what, where, why.",
            "character_profile": "Who a character is, as far as the reader has read: names, "
            "description, facts, relations and events, with the passages they come from. "
            "Arguments: the character's name; optionally upto_chapter.",
            "character_timeline": "A character's story in reading order: chapter-stamped facts "
            "and events from the first appearance on. Use for 'when does X first appear', "
            "'X's arc', 'what happens to X'.",
            "chapter_outline": "The outline of one chapter (its events in order), for 'what "
            "happens in chapter N' or 'summarise chapter N'.",
            "events_between": "What happens from chapter_from to chapter_to, optionally to one "
            "character (name). Use chapter_from=1 and the reader's chapter for 'the story so far'.",
            "plotline": "How two characters' story goes together: the events they share and "
            "the relations read between them, for 'the relationship between X and Y'.",
        }
        return [
            FunctionTool.from_defaults(fn=getattr(self, name), name=name, description=doc + seen)
            for name, doc in docs.items()
        ]
