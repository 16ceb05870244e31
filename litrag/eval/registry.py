"""The chunkers ``litrag eval`` compares, by CLI key, and their cached chunkings.

Plain chunkers and ``semantic`` (it embeds with the harness's cached embedder) make the default
set; the LLM chunkers (``litseg-lite``, ``litseg``, ``lumberchunker``, ``perplexity``, ``margin``
and their ``+merge`` variants) need a ``ChunkerLLM``. The chunkers themselves live in
``litrag.segment`` and ``litrag.chunkers``; this module only names and configures them.

Chunks are cached per chunker, book text, source code of the chunkers and what else they depend on
(the LLM's identity and settings, the embedding model), so a rerun, or a run with one new chunker,
only chunks what is new.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Literal

from llama_index.core.llms import LLM
from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.schema import BaseNode, Document
from llama_index.core.storage.docstore.utils import doc_to_json, json_to_doc

from litrag.chunkers.baselines import BASELINES, dynamic_merge, semantic_chunker
from litrag.eval.embedding_cache import CachedEmbedder, CachedEmbedding, text_key

CHILDREN_SEP = ">"  # ``litseg-offline>aligned``: blocks ranked through paragraph children
# ``aligned``: each child in one block, the blocks snapped to their children
# (``chunkers.children.aligned_book``); ``blocks``: the blocks themselves are scored (how the
# library ranked before children).
CHILDREN_KINDS = ("aligned", "blocks")
CHILDREN_LABELS = {
    "aligned": "aligned to paragraph children",
    "blocks": "ranked as blocks",
}
# The node parsers the library ingests with: their plain keys mean what ``litrag ask`` does,
# blocks aligned to paragraph children and ranked through them (``CHUNKER>blocks``: not).
AS_INGESTED = ("litseg-offline", "litseg-lite", "litseg")
_ID_NAMESPACE = uuid.UUID("1b6f0e0a-2f4c-4f7e-9a53-5d0c8e4a7b21")


@dataclass(frozen=True)
class ChunkerSpec:
    """A chunker by CLI key: its report label and a factory for a fresh ``NodeParser``.

    ``identity`` names what else the chunks depend on (the LLM and its settings, the embedding
    model); it is part of the chunk-cache key. ``slow`` chunkers show progress while chunking.
    """

    key: str
    label: str
    make: Callable[[], NodeParser]
    identity: str = ""
    slow: bool = False
    children: str = ""  # "aligned": ranked through paragraph children

    @property
    def base_key(self) -> str:
        """The chunker whose chunks these are: ``litseg-offline`` for
        ``litseg-offline>aligned`` (the chunk cache and node ids are its own)."""
        return self.key.split(CHILDREN_SEP, 1)[0]


@dataclass(frozen=True)
class ChunkerLLM:
    """The LLM behind the LLM chunkers and how they use it.

    ``identity`` should be stable across runs (for a local llama.cpp server on a random port, the
    model file's name): it keys the chunk cache and the LLM reply cache.
    """

    llm: LLM
    identity: str = ""
    workers: int = 4
    max_unit_words: int = 25_000
    max_retries: int = 20
    timeout: float | None = 600.0
    cache_dir: Path | None = None  # the reply cache folder; the harness sets <cache>/llm
    model_path: Path | None = None  # the GGUF file, for the in-process perplexity chunker

    @property
    def name(self) -> str:
        from litrag.segment.llm_calls import llm_identity

        return self.identity or llm_identity(self.llm)


def _litseg_offline() -> NodeParser:
    from litrag.segment import LitSegNodeParser

    return LitSegNodeParser()


def _litseg_llm(
    setup: ChunkerLLM, segmenter: Literal["litseg-lite", "litseg"], variant: str = "full"
) -> NodeParser:
    from litrag.segment import LitSegNodeParser

    return LitSegNodeParser.from_defaults(
        llm=setup.llm,
        segmenter=segmenter,
        prompt_variant=variant,
        llm_identity=setup.name,
        max_unit_words=setup.max_unit_words,
        max_retries=setup.max_retries,
        num_workers=setup.workers,
        cache_dir=setup.cache_dir,
        request_timeout=setup.timeout,
    )


def _lumberchunker(setup: ChunkerLLM) -> NodeParser:
    from litrag.chunkers.lumberchunker import LumberChunkerNodeParser

    return LumberChunkerNodeParser(
        llm=setup.llm,
        llm_identity=setup.name,
        max_retries=setup.max_retries,
        num_workers=setup.workers,
        cache_dir=setup.cache_dir,
        request_timeout=setup.timeout,
    )


def _margin(setup: ChunkerLLM) -> NodeParser:
    from litrag.chunkers.margin import MarginSamplingNodeParser

    return MarginSamplingNodeParser(
        llm=setup.llm,
        llm_identity=setup.name,
        num_workers=setup.workers,
        cache_dir=setup.cache_dir,
        request_timeout=setup.timeout,
    )


def _perplexity(setup: ChunkerLLM) -> NodeParser:
    from litrag.chunkers.perplexity import PerplexityNodeParser

    if setup.model_path is None:
        raise ValueError("the perplexity chunker runs a GGUF model in process: give --local-llm")
    return PerplexityNodeParser.from_model_path(setup.model_path, cache_dir=setup.cache_dir)


def _semantic_minilm() -> NodeParser:
    from litrag.builders import build_embed_model
    from litrag.models.embedders import minilm_path
    from litrag.settings import Settings

    return semantic_chunker(build_embed_model(Settings(), minilm_path()))


_BASELINE_KEYS = {
    "token": "token 200/40",
    "recursive": "recursive 1000/200",
    "sentence": "sentence 256/32",
    "paragraphs": "paragraphs ≤200w",
}
CHUNKERS: dict[str, ChunkerSpec] = {
    **{k: ChunkerSpec(k, label, BASELINES[label]) for k, label in _BASELINE_KEYS.items()},
    "litseg-offline": ChunkerSpec("litseg-offline", "LitSeg offline", _litseg_offline),
}
# The semantic splitter embeds every sentence group of a book (the costliest chunker without an
# LLM, cached afterwards); it is in the default set because it needs no model beyond the embedder.
# The LLM chunkers are opt-in: they need an LLM.
SEMANTIC_CHUNKER = "semantic"
DEFAULT_CHUNKERS = (*CHUNKERS, SEMANTIC_CHUNKER)
LLM_CHUNKERS: dict[str, tuple[str, Callable[[ChunkerLLM], NodeParser]]] = {
    "litseg-lite": ("LitSeg-Lite", lambda s: _litseg_llm(s, "litseg-lite")),
    "litseg": ("LitSeg", lambda s: _litseg_llm(s, "litseg")),
    "lumberchunker": ("LumberChunker", _lumberchunker),
    "litseg-lite+merge": (
        "LitSeg-Lite + merge ≤200w",
        lambda s: dynamic_merge(_litseg_llm(s, "litseg-lite")),
    ),
    "lumberchunker+merge": (
        "LumberChunker + merge ≤200w",
        lambda s: dynamic_merge(_lumberchunker(s)),
    ),
    # The paper's log-probability baselines: perplexity needs a local GGUF (llama.cpp in
    # process); margin sampling makes one call per sentence (hours per book on a CPU).
    "perplexity": ("perplexity τ=0.5", _perplexity),
    "perplexity+merge": ("perplexity + merge ≤200w", lambda s: dynamic_merge(_perplexity(s))),
    "margin": ("margin sampling", _margin),
    "margin+merge": ("margin sampling + merge ≤200w", lambda s: dynamic_merge(_margin(s))),
    # The paper's ablations (Appendix D.4): LitSeg-Lite's prompt without one theory step, or
    # without narratology; run them on the untuned model for its "w/o" rows.
    **{
        f"litseg-lite-{variant}": (
            f"LitSeg-Lite w/o {label}",
            lambda s, v=variant: _litseg_llm(s, "litseg-lite", v),
        )
        for variant, label in (
            ("no-events", "Theo.S.1"),
            ("no-threads", "Theo.S.2"),
            ("no-turning-points", "Theo.S.3"),
            ("no-theory", "Theory"),
        )
    },
}
ALL_CHUNKERS = (*CHUNKERS, SEMANTIC_CHUNKER, *LLM_CHUNKERS)
OURS = ("litseg-offline", "litseg-lite", "litseg", "litseg-lite+merge")


# Sized variants for ablations: ``litseg-offline@200`` is the offline segmenter with a 200-word
# target (smallest usual block 0.4x, largest 2x, as the defaults 300 / 120 / 600), and
# ``paragraphs@250`` paragraphs merged up to 250 words; so block length can be told apart from
# where the cuts fall.
_SIZED = re.compile(r"^(litseg-offline|paragraphs)@([1-9][0-9]{1,3})$")


def sized_spec(key: str) -> ChunkerSpec | None:
    """The spec of a sized variant key, or None for any other key."""
    m = _SIZED.match(key)
    if m is None:
        return None
    words = int(m.group(2))
    if m.group(1) == "paragraphs":
        from litrag.chunkers.baselines import paragraph_chunker

        return ChunkerSpec(key, f"paragraphs ≤{words}w", lambda: paragraph_chunker(words))

    def make() -> NodeParser:
        from litrag.segment import LitSegNodeParser

        return LitSegNodeParser(
            target_words=words, min_words=max(1, round(words * 0.4)), max_words=words * 2
        )

    return ChunkerSpec(key, f"LitSeg offline, target {words}w", make)


def is_ours(key: str) -> bool:
    """A chunker of this project (sized variants of ours included)."""
    return key.split(CHILDREN_SEP, 1)[0].split("@", 1)[0] in OURS


def chunker_specs(
    keys: Iterable[str],
    llm: ChunkerLLM | None = None,
    embedder: CachedEmbedder | None = None,
) -> list[ChunkerSpec]:
    """Specs for CLI keys; LLM chunkers need ``llm``, ``semantic`` uses ``embedder`` (else it
    loads the packaged MiniLM itself)."""
    out = []
    for key in keys:
        if CHILDREN_SEP in key:
            base, kind = key.split(CHILDREN_SEP, 1)
            if kind not in CHILDREN_KINDS or CHILDREN_SEP in base:
                raise ValueError(
                    f"unknown children {kind!r} in {key!r}: use CHUNKER>aligned (its blocks "
                    "snapped to the paragraph chunker's pieces and ranked through them) or "
                    "CHUNKER>blocks (the blocks scored themselves)"
                )
            spec = _plain_spec(base, llm, embedder)
            label = f"{spec.label} {CHILDREN_LABELS[kind]}"
            children = "" if kind == "blocks" else kind
            out.append(ChunkerSpec(key, label, spec.make, spec.identity, spec.slow, children))
        elif key.split("@", 1)[0] in AS_INGESTED:  # as the library ingests and ranks it
            spec = _plain_spec(key, llm, embedder)
            out.append(replace(spec, children="aligned"))
        else:
            out.append(_plain_spec(key, llm, embedder))
    return out


def _plain_spec(key: str, llm: ChunkerLLM | None, embedder: CachedEmbedder | None) -> ChunkerSpec:
    """The spec of a key without children (its blocks scored as chunked)."""
    if key in CHUNKERS:
        return CHUNKERS[key]
    if (sized := sized_spec(key)) is not None:
        return sized
    if key == SEMANTIC_CHUNKER:
        if embedder is not None:
            model, name = CachedEmbedding(embedder), embedder.model_key
            return ChunkerSpec(key, "semantic p95", lambda m=model: semantic_chunker(m), name)
        return ChunkerSpec(key, "semantic p95", _semantic_minilm, "all-MiniLM-L6-v2")
    if key in LLM_CHUNKERS:
        if llm is None:
            raise ValueError(
                f"chunker {key!r} needs an LLM: give --llm-url (and --model) or --local-llm"
            )
        label, make = LLM_CHUNKERS[key]
        if key.startswith("perplexity") and llm.model_path is None:
            raise ValueError(f"chunker {key!r} runs a GGUF model in process: give --local-llm")
        settings = f"units<={llm.max_unit_words}w, retries {llm.max_retries}"
        ident = f"{llm.name} ({settings})"
        return ChunkerSpec(key, label, lambda m=make: m(llm), ident, slow=True)
    raise ValueError(
        f"unknown chunker {key!r}; choose from {', '.join(ALL_CHUNKERS)} "
        "(or a sized variant: litseg-offline@WORDS, paragraphs@WORDS; or one ranked "
        "through paragraph children: CHUNKER>aligned; or as blocks: CHUNKER>blocks)"
    )


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the chunking code: a cached chunking is reused only while this is unchanged."""
    root = Path(__file__).resolve().parents[1]
    files = sorted(
        f for room in ("segment", "ingestion", "chunkers") for f in root.glob(f"{room}/*.py")
    )
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def chunk_book(
    spec: ChunkerSpec, docs: list[Document], book_key: str, cache_dir: Path | None
) -> tuple[list[BaseNode], bool]:
    """The book's chunks (and whether they came from the cache), with stable node ids."""
    path = None
    if cache_dir is not None:
        folder = f"{slug(spec.base_key)}-{code_fingerprint()}"
        if spec.identity:
            folder += "-" + text_key(spec.identity)[:10]
        path = cache_dir / "chunks" / folder / f"{book_key}.jsonl"
        if path.is_file():
            with path.open(encoding="utf-8") as fh:
                return [json_to_doc(json.loads(line)) for line in fh], True
    nodes = spec.make().get_nodes_from_documents(docs, show_progress=spec.slow)
    for i, node in enumerate(nodes):  # stable ids: reruns upsert the same points
        node.id_ = str(uuid.uuid5(_ID_NAMESPACE, f"{spec.base_key}:{book_key}:{i}"))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(doc_to_json(n), ensure_ascii=False) + "\n" for n in nodes)
        tmp.replace(path)
    return nodes, False
