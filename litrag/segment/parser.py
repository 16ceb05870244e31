"""``LitSegNodeParser``: LitSeg / LitSeg-Lite / offline narrative segmentation as a NodeParser."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.utils import get_tokenizer, get_tqdm_iterable

from litrag.segment import prompts
from litrag.segment.cache import ResponseCache
from litrag.segment.llm_calls import Sampling
from litrag.segment.llm_parser import LLMNodeParser
from litrag.segment.llm_segmenters import OFFLINE, LitSeg, LitSegLite, UnitResult
from litrag.segment.offline import CutCosts, OfflineSegmenter, StaticVectors, boundary_costs
from litrag.segment.prompts import PROMPT_VERSION
from litrag.segment.reconstruct import context_views, enforce_cap
from litrag.segment.sentences import Sentence, split_sentences
from litrag.segment.subtitles import make_subtitles
from litrag.segment.sync import run_sync
from litrag.segment.units import split_unit
from litrag.segment.validation import Block

# Tokens reserved in the size cap for a block's subtitle line (subtitles are cut to fit).
_SUBTITLE_BUDGET = 32
_MAX_SUBTITLE_CHARS = 120

SegmenterName = Literal["offline", "litseg-lite", "litseg"]

# Bookkeeping metadata: stored on every node, kept out of the embedding and LLM views.
_BOOKKEEPING = (
    "unit_index",
    "unit_part",
    "sentence_from",
    "sentence_to",
    "context_idx",
    "segmenter",
    "segmentation_outcome",
    "segmentation_attempts",
    "context_before",
    "context_after",
)


@dataclass
class SegmentationSummary:
    """What a parse did, for callers and the CLI: sizes, LLM use and every outcome counted."""

    units: int = 0
    parts: int = 0
    blocks: int = 0
    block_words: list[int] = field(default_factory=list, repr=False)
    valid: int = 0
    repaired: int = 0
    fallback: int = 0
    offline: int = 0
    retries: int = 0
    llm_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cap_splits: int = 0
    seconds: float = 0.0

    def record(self, result: UnitResult) -> None:
        self.parts += 1
        setattr(self, result.outcome, getattr(self, result.outcome) + 1)
        self.retries += max(result.attempts - 1, 0)
        self.llm_calls += result.calls
        self.cached_calls += result.cached_calls
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        words = d.pop("block_words")
        d["mean_words"] = round(statistics.fmean(words), 1) if words else 0.0
        d["median_words"] = statistics.median(words) if words else 0
        d["max_words"] = max(words) if words else 0
        d["seconds"] = round(self.seconds, 2)
        return d


@dataclass
class _Part:
    doc_pos: int
    part: int
    sentences: list[Sentence]  # indices are document-wide (1-based)
    title: str
    result: UnitResult | None = None


@dataclass
class _Prepared:
    sentences: list[list[Sentence]]  # per document
    parts: list[_Part]
    costs: list[CutCosts]  # per document
    tokens: list[list[int]]  # per document, per sentence


class LitSegNodeParser(LLMNodeParser):
    """Cut narrative documents (chapters) into self-contained plot blocks.

    With no ``llm`` the offline segmenter is used; given an ``llm`` (any LlamaIndex LLM, e.g.
    ``OpenAILike`` against ``vllm serve``) LitSeg-Lite is used unless ``segmenter`` says otherwise.
    Each node's text is the block's exact slice of its document (``start_char_idx`` and
    ``end_char_idx`` point at it); the subtitle and context sentences appear in the embedding and
    LLM views through the node's metadata and text template.
    """

    segmenter: SegmenterName | None = Field(
        default=None,
        description="'offline', 'litseg-lite' or 'litseg'; None picks 'litseg-lite' when an LLM "
        "is given, else 'offline'.",
    )
    prompt_version: str = Field(
        default=PROMPT_VERSION, description="Version of the segmentation prompts (cache key)."
    )
    prompt_variant: str = Field(
        default="full",
        description="LitSeg-Lite's prompt: 'full', or an ablation of the paper's Appendix D.4: "
        "'no-events', 'no-threads', 'no-turning-points', 'no-theory'.",
    )
    max_unit_words: int = Field(
        default=25_000,
        gt=0,
        description="Units longer than this are split by paragraphs, then sentences, before "
        "segmentation (the paper's n). Lower it for small-context LLMs.",
    )
    max_retries: int = Field(
        default=20, ge=0, description="Retries of an invalid LLM segmentation before repair."
    )
    retry_feedback: bool = Field(
        default=True, description="Tell the LLM what was wrong with its previous reply on retry."
    )
    temperature: float = Field(default=0.7, description="LLM sampling temperature (paper).")
    top_p: float = Field(default=0.8, description="LLM nucleus sampling (paper).")
    top_k: int = Field(default=20, description="LLM top-k sampling (paper).")
    json_mode: bool = Field(
        default=True, description="Ask OpenAI-compatible servers for a JSON object response."
    )
    max_output_tokens: int | None = Field(
        default=None, description="Cap on tokens the LLM may generate per call."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra request fields for OpenAI-compatible servers, e.g. "
        "{'chat_template_kwargs': {'enable_thinking': False}} for Qwen3 on vLLM.",
    )
    max_block_tokens: int = Field(
        default=512,
        gt=8,
        description="Hard cap per block (main text + context + subtitle) in tokens of "
        "`tokenizer`; longer blocks are cut at their weakest-cohesion boundary.",
    )
    target_words: int = Field(default=300, gt=0, description="Offline: preferred block size.")
    min_words: int = Field(default=120, gt=0, description="Offline: smallest usual block.")
    max_words: int = Field(default=600, gt=0, description="Offline: largest block.")
    cohesion_window: int = Field(
        default=3, ge=1, description="Sentences on each side when scoring cohesion at a boundary."
    )

    _needs_llm: ClassVar[bool] = False  # the offline segmenter needs none
    _dump_order: ClassVar[tuple[str, ...]] = (
        "segmenter",
        "llm_identity",
        "prompt_version",
        "prompt_variant",
        "max_unit_words",
        "max_retries",
        "retry_feedback",
        "temperature",
        "top_p",
        "top_k",
        "json_mode",
        "max_output_tokens",
        "extra_body",
        "request_timeout",
        "num_workers",
        "cache_dir",
        "max_block_tokens",
        "target_words",
        "min_words",
        "max_words",
        "cohesion_window",
    )

    _tokenizer: Callable[[str], Sequence] = PrivateAttr()
    _vectors: StaticVectors | None = PrivateAttr(default=None)
    _summary: SegmentationSummary = PrivateAttr(default_factory=SegmentationSummary)

    def __init__(
        self,
        llm: LLM | None = None,
        segmenter: SegmenterName | None = None,
        tokenizer: Callable[[str], Sequence] | None = None,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if segmenter is None:
            segmenter = "litseg-lite" if llm is not None else "offline"
        if segmenter != "offline" and llm is None:
            raise ValueError(f"segmenter={segmenter!r} needs an llm")
        variant = kwargs.get("prompt_variant", "full")
        prompts.lite_system(variant)  # an unknown variant is a ValueError naming the known ones
        if variant != "full" and segmenter != "litseg-lite":
            raise ValueError(f"prompt_variant={variant!r} is a LitSeg-Lite ablation")
        super().__init__(llm, callback_manager, segmenter=segmenter, **kwargs)
        self._tokenizer = tokenizer or get_tokenizer()

    # -- pickling (an IngestionPipeline's worker processes) ---------------------------------

    def __getstate__(self) -> dict[str, Any]:
        # ``IngestionPipeline.run(num_workers=N)`` pickles the parser into spawned processes.
        # LlamaIndex's default tokenizer pickles as a tiktoken encoding that a worker would fetch
        # from the network (LlamaIndex's bundled copy is found only through ``get_tokenizer``),
        # and the word vectors are a cache: neither travels, the worker's parser rebuilds them.
        light = copy.copy(self)
        light._vectors = None
        if light._tokenizer is get_tokenizer():
            light._tokenizer = None  # type: ignore[assignment]
        return super(LitSegNodeParser, light).__getstate__()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # LlamaIndex rebuilds a component through ``__init__`` from its fields, dropping private
        # attributes: a tokenizer of the caller's is passed back in, so a worker caps blocks as
        # the parser it came from.
        tokenizer = (state.get("__pydantic_private__") or {}).get("_tokenizer")
        try:
            self.__init__(**state["__dict__"], tokenizer=tokenizer)  # type: ignore[misc]
        except Exception:
            super().__setstate__(state)
            self._tokenizer = tokenizer or get_tokenizer()

    @classmethod
    def from_defaults(
        cls,
        llm: LLM | None = None,
        segmenter: SegmenterName | None = None,
        tokenizer: Callable[[str], Sequence] | None = None,
        cache_dir: str | Path | None = None,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> LitSegNodeParser:
        return cls(
            llm=llm,
            segmenter=segmenter,
            tokenizer=tokenizer,
            cache_dir=cache_dir,
            callback_manager=callback_manager,
            **kwargs,
        )

    @classmethod
    def class_name(cls) -> str:
        return "LitSegNodeParser"

    @property
    def summary(self) -> SegmentationSummary:
        """Counts over every parse since construction (or ``reset_summary``)."""
        return self._summary

    def reset_summary(self) -> None:
        self._summary = SegmentationSummary()

    # -- planning -------------------------------------------------------------------------

    def _plan(self, docs: Sequence[BaseNode]) -> tuple[list[list[Sentence]], list[_Part]]:
        all_sentences: list[list[Sentence]] = []
        parts: list[_Part] = []
        for pos, doc in enumerate(docs):
            sentences = split_sentences(doc.get_content(metadata_mode=MetadataMode.NONE))
            all_sentences.append(sentences)
            title = str(doc.metadata.get("chapter_title") or doc.metadata.get("title") or "")
            for k, chunk in enumerate(split_unit(sentences, self.max_unit_words)):
                parts.append(_Part(pos, k, chunk, title))
        return all_sentences, parts

    def _llm_segmenter(self, cache: ResponseCache | None) -> LitSegLite | LitSeg:
        sampling = Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            json_mode=self.json_mode,
            max_tokens=self.max_output_tokens,
            extra_body=tuple(sorted(self.extra_body.items())),
        )
        caller = self._caller(sampling, cache)
        if self.segmenter == "litseg":
            return LitSeg(caller, max_retries=self.max_retries, retry_feedback=self.retry_feedback)
        return LitSegLite(
            caller,
            max_retries=self.max_retries,
            retry_feedback=self.retry_feedback,
            prompt_variant=self.prompt_variant,
        )

    @staticmethod
    def _local(part: _Part, result: UnitResult) -> UnitResult:
        """Shift a part's 1-based local indices to document-wide sentence indices."""
        off = part.sentences[0].index - 1
        result.blocks = [
            Block(b.start + off, b.end + off, b.subtitle, tuple(c + off for c in b.context))
            for b in result.blocks
        ]
        return result

    # -- parsing --------------------------------------------------------------------------

    def _prepare(self, nodes: Sequence[BaseNode]) -> _Prepared:
        """Sentences, parts, cut costs and token counts of every document."""
        all_sentences, parts = self._plan(nodes)
        if self._vectors is None:
            self._vectors = StaticVectors()
        costs = [
            boundary_costs(s, self._vectors.encode([x.flat for x in s]), self.cohesion_window)
            for s in all_sentences
        ]
        tokens = [
            self._sentence_tokens(d.get_content(metadata_mode=MetadataMode.NONE), s)
            for d, s in zip(nodes, all_sentences, strict=True)
        ]
        return _Prepared(all_sentences, parts, costs, tokens)

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        if self.segmenter != "offline":
            return run_sync(self._aparse_nodes(nodes, show_progress=show_progress, **kwargs))
        t0 = time.perf_counter()
        prep = self._prepare(nodes)
        offline = OfflineSegmenter(
            self.target_words, self.min_words, self.max_words, self.cohesion_window
        )
        for part in get_tqdm_iterable(prep.parts, show_progress, "Segmenting units"):
            first, n = part.sentences[0].index - 1, len(part.sentences)
            blocks = offline.segment(
                part.sentences,
                prep.costs[part.doc_pos].window(first, n),
                prep.tokens[part.doc_pos][first : first + n],
                self.max_block_tokens - self._overhead(nodes[part.doc_pos]),
            )
            part.result = self._local(part, UnitResult(blocks, OFFLINE))
        out = self._build(nodes, prep)
        self._summary.seconds += time.perf_counter() - t0
        return out

    async def _aparse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        if self.segmenter == "offline":
            return self._parse_nodes(nodes, show_progress=show_progress, **kwargs)
        t0 = time.perf_counter()
        prep = self._prepare(nodes)
        todo = [p for p in prep.parts if p.sentences]
        with self._reply_cache() as cache:
            segmenter = self._llm_segmenter(cache)
            results = await self._gather(
                [partial(segmenter.asegment, p.sentences, p.title) for p in todo],
                show_progress,
                "Segmenting",
            )
        for part, result in zip(todo, results, strict=True):
            part.result = self._local(part, result)
        out = self._build(nodes, prep)
        self._summary.seconds += time.perf_counter() - t0
        return out

    def _sentence_tokens(self, text: str, sentences: list[Sentence]) -> list[int]:
        """Tokens of each sentence with the whitespace after it, so sums match joined text."""
        ends = [s.start for s in sentences[1:]] + [sentences[-1].end] if sentences else []
        return [
            len(self._tokenizer(text[s.start : e])) for s, e in zip(sentences, ends, strict=True)
        ]

    def _overhead(self, doc: BaseNode) -> int:
        """Tokens the embedding view adds to a block: the document's metadata and a subtitle."""
        return len(self._tokenizer(doc.get_metadata_str(MetadataMode.EMBED))) + _SUBTITLE_BUDGET

    def _build(self, docs: Sequence[BaseNode], prep: _Prepared) -> list[BaseNode]:
        summary = self._summary
        summary.units += len(docs)
        by_doc: dict[int, list[_Part]] = {}
        for part in prep.parts:
            if part.result is not None:
                by_doc.setdefault(part.doc_pos, []).append(part)
        nodes: list[BaseNode] = []
        for pos, doc in enumerate(docs):
            sentences = prep.sentences[pos]
            if not sentences:
                continue
            text = doc.get_content(metadata_mode=MetadataMode.NONE)
            tokens, cost = prep.tokens[pos], prep.costs[pos].cost
            overhead = self._overhead(doc)
            placed: list[tuple[Block, UnitResult, int]] = []
            for part in by_doc.get(pos, []):
                assert part.result is not None
                summary.record(part.result)
                capped, forced = enforce_cap(
                    part.result.blocks, tokens, cost, self.max_block_tokens, overhead
                )
                summary.cap_splits += forced
                placed.extend((b, part.result, part.part) for b in capped)
            missing = [i for i, (b, _, _) in enumerate(placed) if not b.subtitle]
            subs = make_subtitles([_slice(text, sentences, placed[i][0]) for i in missing])
            for i, sub in zip(missing, subs, strict=True):
                b, r, k = placed[i]
                placed[i] = (Block(b.start, b.end, sub, b.context), r, k)
            source = doc.as_related_node_info()  # hashes the whole document: once per document
            queue = list(reversed(placed))
            while queue:
                block, result, part_no = queue.pop()
                node = self._node(doc, source, pos, text, sentences, block, result, part_no, 0)
                size = len(self._tokenizer(node.get_content(metadata_mode=MetadataMode.EMBED)))
                if size > self.max_block_tokens and block.start < block.end:
                    # the estimate from per-sentence counts was short: cut this block again
                    excess = size - self.max_block_tokens
                    smaller, _ = enforce_cap(
                        [block], tokens, cost, self.max_block_tokens, overhead + excess
                    )
                    summary.cap_splits += 1
                    queue.extend((b, result, part_no) for b in reversed(smaller))
                    continue
                node.id_ = self.id_func(len(nodes), doc)
                nodes.append(node)
                summary.blocks += 1
                summary.block_words.append(len(node.text.split()))
        return nodes

    def _node(
        self,
        doc: BaseNode,
        source: RelatedNodeInfo,
        pos: int,
        text: str,
        sentences: list[Sentence],
        block: Block,
        result: UnitResult,
        part_no: int,
        i: int,
    ) -> TextNode:
        start = sentences[block.start - 1].start
        end = sentences[block.end - 1].end
        before, after = context_views(sentences, block)
        unit_index = doc.metadata.get("chapter_index", pos)
        metadata = {
            "subtitle": block.subtitle[:_MAX_SUBTITLE_CHARS],
            "unit_index": unit_index,
            "unit_part": part_no,
            "sentence_from": block.start,
            "sentence_to": block.end,
            "context_idx": list(block.context),
            "context_before": before,
            "context_after": after,
            "segmenter": self.segmenter,
            "segmentation_outcome": result.outcome,
            "segmentation_attempts": result.attempts,
        }
        esc = lambda s: s.replace("{", "{{").replace("}", "}}")  # noqa: E731
        template = "{metadata_str}\n\n"
        template += f"{esc(before)}{CONTEXT_JOIN}" if before else ""
        template += "{content}"
        template += f"{CONTEXT_JOIN}{esc(after)}" if after else ""
        node = TextNode(
            id_=self.id_func(i, doc),
            text=text[start:end],
            start_char_idx=start,
            end_char_idx=end,
            metadata=metadata,
            excluded_embed_metadata_keys=[*doc.excluded_embed_metadata_keys, *_BOOKKEEPING],
            excluded_llm_metadata_keys=[*doc.excluded_llm_metadata_keys, *_BOOKKEEPING],
            metadata_separator=doc.metadata_separator,
            metadata_template=doc.metadata_template,
            text_template=template,
            relationships={NodeRelationship.SOURCE: source},
        )
        return node

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        # The base class re-finds offsets with text.find(), which picks the first copy of a
        # repeated passage; ours are exact, so keep them.
        spans = [(n.start_char_idx, n.end_char_idx) for n in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, (a, b) in zip(nodes, spans, strict=True):
            node.start_char_idx, node.end_char_idx = a, b
        return nodes


CONTEXT_JOIN = "\n[...]\n"


def _slice(text: str, sentences: list[Sentence], block: Block) -> str:
    return text[sentences[block.start - 1].start : sentences[block.end - 1].end]
