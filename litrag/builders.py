"""The composition root: embedding models, LLMs, the node parser, the library and query engines,
built from ``litrag.settings.Settings``.

Every import of a backend is inside the builder that needs it, so importing this module is cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from litrag.settings import Settings, SettingsError, llm_backend, read_words

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.vector_stores.types import BasePydanticVectorStore

    from litrag.answering.answer import BookQueryEngine
    from litrag.ingestion.library import BookRecord, Library
    from litrag.ingestion.stages import BookParts
    from litrag.models.llama_server import LlamaServer
    from litrag.narrative.asset_store import AssetRemover, AssetStore
    from litrag.narrative.engine import NarrativeQueryEngine
    from litrag.narrative.index import CharacterIndexer
    from litrag.retrieval.retriever import RetrievalSettings
    from litrag.scoring.windows import SentenceWindowEncoder
    from litrag.segment import LitSegNodeParser

T = TypeVar("T")


def build_embed_model(s: Settings, model_path: str | Path | None = None) -> BaseEmbedding:
    """The dense embedder: ``model_path``, else ``LITRAG_EMBED_MODEL``: the packaged MiniLM by
    default (preset ``fast``), windowed so that nothing is truncated, on the configured runtime;
    or ``nomic`` (preset ``quality``), nomic-embed-text-v1.5 on llama.cpp, assembled from its
    packages on first use."""
    from litrag.models.embedders import WindowedEmbedding

    if model_path is None and s.embed_url:
        return build_served_embedding(s)
    if model_path is None and s.embed_model == "nomic":
        from litrag.models.nomic import NomicEmbedding

        return NomicEmbedding(_nomic_path(s), n_threads=s.embed_threads)
    if model_path is not None:
        return WindowedEmbedding(model_path, backend=s.embed_backend, precision=s.embed_precision)
    return _from_embed_model(
        s,
        lambda path: WindowedEmbedding(path, backend=s.embed_backend, precision=s.embed_precision),
    )


def build_served_embedding(s: Settings) -> BaseEmbedding:
    """The embedding server at ``LITRAG_EMBED_URL`` (probed once: a dead server is one line)."""
    try:
        from litrag.models.served_embeddings import ServedEmbedding, ServedEmbeddingError
    except ImportError as exc:  # the client package is an extra
        raise SettingsError(
            f"LITRAG_EMBED_URL needs litrag[openai] ({exc.name} is not installed): "
            "pip install 'litrag[openai]'"
        ) from None
    assert s.embed_url
    try:
        return ServedEmbedding.from_server(
            s.embed_url,
            s.embed_served_model,
            api_key=s.embed_api_key,
            query_prefix=s.embed_query_prefix,
            document_prefix=s.embed_doc_prefix,
            batch_size=s.embed_batch,
            timeout=s.embed_timeout,
        )
    except ServedEmbeddingError as exc:
        raise SettingsError(str(exc)) from None


def _nomic_path(s: Settings) -> Path:
    """The quality preset's GGUF, assembled and quantised under the models folder if new."""
    from litrag.models.nomic import DEFAULT_QUANT
    from litrag.models.nomic_files import quantized_path

    return quantized_path(DEFAULT_QUANT, s.models_dir or s.home / "models")


def _from_embed_model(s: Settings, load: Callable[[Path], T]) -> T:
    """``load(path)`` of the configured embedding model's folder; a folder that does not load
    (no sentence-transformers model) is one ``SettingsError`` naming it, whichever of the parser
    (its tokenizer, built first) or the embedder meets it."""
    from litrag.models.embedders import minilm_path
    from litrag.settings import SettingsError

    path = minilm_path() if s.embed_model == "minilm" else Path(s.embed_model)
    try:
        return load(path)
    except Exception as exc:
        if s.embed_model == "minilm":
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SettingsError(
            f"LITRAG_EMBED_MODEL must be minilm, nomic or a sentence-transformers folder; "
            f"{path} does not load ({type(exc).__name__}: {first[:160]})"
        ) from None


def build_llm(s: Settings) -> LLM | None:
    """The segmenting LLM: the server at ``LITRAG_SEGMENT_URL`` (else ``LITRAG_LLM_URL``) through
    the configured backend (in-process vLLM for backend ``vllm`` without a URL), or None for the
    offline segmenter."""
    from litrag.models.served import in_process_vllm, server_llm

    backend = llm_backend(s)
    url = s.segment_url or s.llm_url
    model = (s.segment_model or s.llm_model) if s.segment_url else s.llm_model
    if backend == "vllm" and not url:
        return in_process_vllm(model)
    if not url or backend == "local":
        return None
    return server_llm(
        backend, url, model, context_window=s.llm_context, timeout=600, api_key=s.llm_api_key
    )


def build_parser(s: Settings, llm: LLM | None = None) -> LitSegNodeParser:
    from litrag.models.embedders import embedding_tokenizer
    from litrag.segment import LitSegNodeParser

    if s.embed_model == "nomic":  # the size cap counts the tokens nomic reads
        from litrag.models.nomic import nomic_tokenizer

        tokenizer = nomic_tokenizer(_nomic_path(s))
    else:
        tokenizer = _from_embed_model(s, embedding_tokenizer)
    return LitSegNodeParser(
        llm=llm,
        segmenter=s.segmenter,  # type: ignore[arg-type]
        tokenizer=tokenizer,
        num_workers=s.workers,
        cache_dir=str(s.home / "cache") if llm is not None else None,
    )


def build_window_encoder(embed: BaseEmbedding) -> SentenceWindowEncoder | None:
    """Each block's 3-sentence windows, embedded by ``embed``: the store's MaxSim multivector;
    None for an embedder that reads a block whole (nomic), whose library keeps one vector a
    point: windows there would multiply a slow ingest (docs/lab/, issue 30)."""
    from litrag.models.nomic import reads_whole_texts
    from litrag.scoring.windows import SentenceWindowEncoder

    if reads_whole_texts(embed) or getattr(embed, "reads_whole", False):  # a served one too
        return None
    return SentenceWindowEncoder(embed.get_text_embedding_batch)


def build_store(s: Settings, **kwargs: Any) -> BasePydanticVectorStore:
    """The library's vector store: embedded Qdrant Edge under ``s.home``, or the Qdrant server
    at ``QDRANT_URL``; ``kwargs`` as ``make_vector_store`` takes them."""
    from litrag.stores.factory import make_vector_store

    kwargs.setdefault("collection", s.collection)
    if s.qdrant_url:  # how a new server collection is sharded
        kwargs.setdefault("shard_by_book", s.qdrant_shard_by_book or bool(s.qdrant_shard_groups))
        kwargs.setdefault("shard_groups", s.qdrant_shard_groups)
    return make_vector_store(s.home, url=s.qdrant_url, api_key=s.qdrant_api_key, **kwargs)


def build_shared_store(
    s: Settings,
    dense_dim: int | None = None,
    window_doc_fn: SentenceWindowEncoder | None = None,
    collection: str | None = None,
) -> BasePydanticVectorStore:
    """The store (or another collection of the library) for a process whose threads share it:
    embedded, one lock around its calls; a server, qdrant-client (thread-safe)."""
    blocks = collection in (None, s.collection)
    return build_store(
        s,
        collection=collection or s.collection,
        dense_dim=dense_dim,
        window_doc_fn=window_doc_fn,
        new_windowed=blocks_windowed(s) if blocks else None,
        thread_safe=True,
    )


def blocks_windowed(s: Settings) -> bool:
    """Whether a blocks' collection made now keeps sentence-window vectors: not with children.

    With children, retrieval ranks blocks through them, so the blocks keep one vector each (as a
    server collection does): their windows were the largest ingest cost after the children's and
    ranked nothing. A library made before keeps its windows (and ``rank_through="blocks"`` on it
    still searches them)."""
    return not s.children


def build_children_store(
    s: Settings,
    dense_dim: int | None = None,
    window_doc_fn: SentenceWindowEncoder | None = None,
    thread_safe: bool = False,
) -> BasePydanticVectorStore:
    """The collection of the blocks' paragraph children, beside the blocks' own, with BM25
    statistics of paragraphs (small-to-big: ``rank_through="children"``)."""
    from litrag.scoring.bm25 import BM25Encoder
    from litrag.stores.factory import CHILD_AVG_LEN, children_collection

    return build_store(
        s,
        collection=children_collection(s.collection),
        dense_dim=dense_dim,
        window_doc_fn=window_doc_fn,
        encoder=BM25Encoder(avg_len=CHILD_AVG_LEN),
        thread_safe=thread_safe,
    )


def has_children(s: Settings, records: Sequence[BookRecord], book_ids: Sequence[str]) -> bool:
    """Whether every one of ``book_ids`` was ingested with paragraph children (and the
    children's collection is there to open)."""
    from litrag.stores.factory import children_collection

    wanted = set(book_ids)
    chosen = [r for r in records if r.book_id in wanted]
    if not chosen or any(r.children <= 0 for r in chosen):
        return False
    return bool(s.qdrant_url) or (s.home / "index" / children_collection(s.collection)).exists()


def build_book_parts(s: Settings, embed: bool = True) -> BookParts:
    """What cuts and embeds a book (``litrag.ingestion.stages.BookParts``): the parser, the
    embedder (``embed``; a worker that only segments goes without) and its window encoder, the
    character indexer, the paragraph aligner. The library and each Ray worker build theirs here,
    so both cut the same blocks."""
    from litrag.chunkers.children import ParagraphAligner
    from litrag.ingestion.stages import BookParts

    parser = build_parser(s, build_llm(s))  # first: a segmenter without its LLM writes nothing
    model = build_embed_model(s) if embed else None
    return BookParts(
        parser,
        model,
        ParagraphAligner() if s.children else None,
        build_character_indexer(s),
        build_window_encoder(model) if model is not None else None,
    )


def build_library(s: Settings) -> Library:
    from litrag.ingestion.embedder_record import check_embedder, embedder_key
    from litrag.ingestion.library import Library

    parts = build_book_parts(s)
    embed, windows = parts.embed_model, parts.window_encoder
    # before the store is opened with this model's dimension: one line naming the fix
    check_embedder(Library.read_registry(s.home), embedder_key(embed))
    dim = len(embed.get_text_embedding("dimension probe"))
    store = build_store(s, dense_dim=dim, window_doc_fn=windows, new_windowed=blocks_windowed(s))
    children = build_children_store(s, dim, windows) if s.children else None
    return Library(
        s.home,
        store,
        embed,
        parts.parser,
        max_bytes=int(s.max_mb * 1024 * 1024),
        window_encoder=windows,
        characters=parts.characters,
        assets=build_asset_remover(s),
        children_store=children,
    )


def build_asset_remover(s: Settings) -> AssetRemover:
    """What removes a book's narrative assets with the book (its own collection and graph)."""
    from litrag.narrative.asset_store import AssetRemover

    return AssetRemover(s.home, s.collection, s.qdrant_url, s.qdrant_api_key)


def build_character_indexer(s: Settings) -> CharacterIndexer | None:
    """The ingest's character index (``litrag[narrative]``), or None where it is off or absent."""
    from litrag.narrative import character_index_available

    if not s.characters or not character_index_available():
        return None
    from litrag.narrative.index import CharacterIndexer

    return CharacterIndexer(s.home)


# ------------------------------------------------------------------------- models on demand
def build_url_llm(
    s: Settings,
    url: str,
    model: str,
    *,
    backend: str | None = None,
    timeout: float = 120.0,
    context_window: int | None = None,
    api_key: str | None = None,
    **kwargs: Any,
) -> LLM:
    """A chat LLM for the OpenAI-compatible server at ``url`` through ``backend``'s client
    (default: the configured backend; ``local`` reaches a server through ``openai-like``)."""
    from litrag.models.served import server_llm, url_client

    return server_llm(
        url_client(backend or llm_backend(s)),
        url,
        model,
        context_window=context_window or s.llm_context,
        timeout=timeout,
        api_key=api_key,
        **kwargs,
    )


def build_in_process_vllm(model: str) -> LLM:
    """vLLM in this process (segmentation only; answering needs ``vllm serve``)."""
    from litrag.models.served import in_process_vllm

    return in_process_vllm(model)


def local_server(
    s: Settings,
    name: str | None = None,
    *,
    n_ctx: int | None = None,
    start: bool = True,
    **kwargs: Any,
) -> LlamaServer:
    """The packaged model ``name`` (default ``LITRAG_LOCAL_LLM``) behind llama.cpp's server,
    started unless ``start=False`` (then the caller enters it); stops on ``stop()`` or at exit."""
    from litrag.models.llama_server import LlamaServer, local_model_path

    path = local_model_path(name or s.local_llm, s.models_dir or s.home / "models")
    server = LlamaServer(path, n_ctx=n_ctx or s.llm_context, **kwargs)
    return server.start() if start else server


def build_lazy_local_llm(
    s: Settings,
    name: str,
    *,
    n_ctx: int,
    timeout: float,
    backend: str | None = None,
    on_start: Callable[[], None] | None = None,
) -> LLM:
    """The packaged model behind llama.cpp's server, started on its first uncached call."""
    from litrag.models.lazy import LazyServerLLM

    def start() -> LlamaServer:
        if on_start is not None:
            on_start()
        return local_server(s, name, n_ctx=n_ctx)

    def client(server: LlamaServer) -> LLM:
        return build_url_llm(
            s, server.api_base, server.model, backend=backend, timeout=timeout, context_window=n_ctx
        )

    return LazyServerLLM(start, client, model=name, context_window=n_ctx)


def build_reranker(model_path: str | Path, **kwargs: Any) -> BaseNodePostprocessor:
    """The Qwen3 reranker (transformers) from a local model folder."""
    from litrag.retrieval.rerank import Qwen3Reranker

    return Qwen3Reranker(model_path=str(model_path), **kwargs)


def build_served_reranker(s: Settings, top_n: int) -> BaseNodePostprocessor:
    """The ``/rerank`` server at ``LITRAG_RERANK_URL``. Nothing is asked of it here: a dead or
    stalled server costs each question one warning and the fused order, not the answer."""
    from litrag.retrieval.rerank import ServedReranker

    assert s.rerank_url
    return ServedReranker(
        url=s.rerank_url,
        model=s.rerank_model,
        api_key=s.rerank_api_key,
        top_n=top_n,
        timeout=s.rerank_timeout,
    )


# ------------------------------------------------------------------------------ answering
def thinking_off(model: str) -> dict[str, Any]:
    """OpenAI-call kwargs that turn Qwen3's thinking off (vLLM / SGLang chat templates)."""
    if "qwen3" in model.lower():
        return {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    return {}


class AnswerLLM:
    """The answering LLM and whatever runs it (the local llama.cpp server, started on demand)."""

    def __init__(
        self, llm: LLM | None, description: str, server: LlamaServer | None = None
    ) -> None:
        self.llm = llm
        self.description = description
        self.server = server

    def diagnose(self) -> str | None:
        """Why the LLM is gone when its local server crashed (one line), else None."""
        return self.server.failure() if self.server is not None else None

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self) -> AnswerLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_answer_llm(s: Settings, max_tokens: int = 256) -> AnswerLLM:
    """``LITRAG_LLM_URL`` through the configured backend (OpenAILike or llama-index-llms-vllm),
    else the packaged local model on llama.cpp.

    Starting the local server loads the GGUF (seconds); it stops on ``close()`` or at exit.
    Raises ``LocalModelError`` when the local model cannot start, ``BackendError`` (one line)
    for backend ``vllm`` without a server URL.
    """
    from litrag.models.llama_server import LlamaServer, local_model_path
    from litrag.models.served import (
        answering_needs_a_server,
        describe,
        fitted_context_window,
        server_llm,
    )

    backend = llm_backend(s)
    if backend == "vllm" and not s.llm_url:
        raise answering_needs_a_server(s.llm_model)
    if s.llm_url and backend != "local":
        llm = server_llm(
            backend,
            s.llm_url,
            s.llm_model,
            context_window=fitted_context_window(s.llm_url, s.llm_api_key, s.llm_context),
            timeout=s.llm_timeout or 120.0,
            max_tokens=max_tokens,
            # Qwen3's non-thinking recommendation, unless LITRAG_LLM_TEMPERATURE says otherwise
            temperature=0.7 if s.llm_temperature is None else s.llm_temperature,
            api_key=s.llm_api_key,
            extra_body=thinking_off(s.llm_model).get("extra_body"),
            function_calling=s.llm_tools,
        )
        return AnswerLLM(llm, describe(backend, s.llm_model, s.llm_url))
    path = local_model_path(s.local_llm, s.models_dir or s.home / "models")
    # Answers need no per-token logits: without them llama-cpp-python does not keep an
    # n_ctx x vocabulary float array (2.5 GB for Qwen's 152k vocabulary at 4k context).
    # Flash attention: the prompt is read 6-13% faster on 2 AVX2 cores (2,000-token answer
    # prompts, 37-39 -> 39-45 tokens/s), with the same answers.
    args = ["--logits_all", "False", "--flash_attn", "True"]
    server = LlamaServer(path, n_ctx=s.llm_context, extra_args=args).start()
    # Nothing streams until the whole prompt is read: on a busy 2-core CPU a full context takes
    # minutes. A retry would only queue the same work again on the one local server.
    llm = server.llm(
        timeout=s.llm_timeout or 900.0,
        max_retries=0,
        max_tokens=max_tokens,
        temperature=s.llm_temperature or 0.0,
    )
    return AnswerLLM(llm, f"{path.stem} (local llama.cpp)", server)


def build_query_engine(
    s: Settings,
    book_ids: str | list[str],
    *,
    upto_chapter: int | dict[str, int] | None = None,
    llm: LLM | None = None,
    llm_description: str | None = None,
    reranker: BaseNodePostprocessor | None = None,
    retrieval: RetrievalSettings | None = None,
    store: BasePydanticVectorStore | None = None,
    embed_model: BaseEmbedding | None = None,
    streaming: bool = True,
    llm_health: Callable[[], str | None] | None = None,
    records: list[BookRecord] | None = None,
    children_store: BasePydanticVectorStore | None = None,
) -> BookQueryEngine:
    """A ``BookQueryEngine`` over the library at ``s.home`` (``llm=None``: extractive answers).

    Raises ``UnknownBookError`` for books not (completely) ingested, ``StoreLockedError`` when
    another process holds the embedded store. Pass ``store`` / ``embed_model`` to share them
    between engines (one per conversation), ``records`` (the registry) when the caller has
    read it already. ``children_store`` (the paragraph children's collection) likewise; without
    it the engine opens its own where the books were ingested with children and the settings
    rank through them.
    """
    from litrag.answering.answer import BookQueryEngine
    from litrag.ingestion.integrity import LibraryDamagedError, check_store, unfinished_reembed
    from litrag.ingestion.library import Library
    from litrag.retrieval.retriever import (
        BookRetriever,
        RetrievalSettings,
        check_books,
        loaded_books,
    )

    if (reembed := unfinished_reembed(s.home)) is not None:  # the UI and the API too
        raise LibraryDamagedError([reembed])
    if records is None:
        records = Library.read_registry(s.home)
    done, partial = loaded_books(records)
    check_books(book_ids, done, partial)  # before opening (and locking) the store
    settings = retrieval or RetrievalSettings.from_settings(s)
    if reranker is None and s.rerank_url:  # on by default where a rerank server is named
        reranker = build_served_reranker(s, settings.top_k)
        if "candidates" not in s.retrieval_overrides:  # LITRAG_RETRIEVAL_CANDIDATES wins
            settings = settings.model_copy(update={"candidates": s.rerank_candidates})
    shared = store is not None
    if store is None:
        store = build_store(s)
    chosen = [book_ids] if isinstance(book_ids, str) else list(book_ids)
    problems = check_store(store, records, chosen)  # counts and one point per book: ms
    if problems:
        if not shared and hasattr(store, "close"):
            store.close()
        raise LibraryDamagedError(problems)
    if embed_model is None and settings.mode != "sparse":
        embed_model = build_embed_model(s)
    if embed_model is not None:  # a question embedded by another model ranks noise
        from litrag.ingestion.embedder_record import check_embedder, embedder_key

        try:
            check_embedder(records, embedder_key(embed_model), chosen)
        except Exception:
            if not shared and hasattr(store, "close"):
                store.close()
            raise
    own_kids = None  # the children's store opened here (closed here on a refusal)
    if settings.rank_through != "children" or not has_children(s, records, chosen):
        children_store = None  # ranked as blocks: what these books were ingested with
    elif children_store is None:
        children_store = own_kids = build_children_store(s)
    if children_store is not None:  # ranked through them: missing children answer "Nothing"
        from litrag.ingestion.integrity import check_children

        problems = check_children(children_store, records, chosen)
        if problems:
            for st in (None if shared else store, own_kids):
                if st is not None and hasattr(st, "close"):
                    st.close()
            raise LibraryDamagedError(problems)
    retriever = BookRetriever(
        store,
        embed_model,
        book_ids,
        upto_chapter=upto_chapter,
        settings=settings,
        reranker=reranker,
        books=done,
        partial_books=partial,
        children_store=children_store,
    )
    return BookQueryEngine(
        retriever,
        llm,
        streaming=streaming,
        answered_by=llm_description,
        passage_order=s.passage_order,  # type: ignore[arg-type]
        llm_health=llm_health,
        read_words=read_words(s),
    )


def open_asset_store(s: Settings) -> AssetStore | None:
    """The library's asset collection, or None where it was never made (no ``litrag assets``
    run on the embedded store: nothing is created to be found empty)."""
    from litrag.narrative.asset_store import AssetStore, assets_collection

    if not s.qdrant_url and not (s.home / "index" / assets_collection(s.collection)).exists():
        return None
    return AssetStore.open(s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key)


def build_routed_engine(
    s: Settings,
    book_ids: str | list[str],
    *,
    use_agent: bool = True,
    assets: AssetStore | None = None,
    **kwargs: Any,
) -> BookQueryEngine | NarrativeQueryEngine:
    """A ``NarrativeQueryEngine`` for one book with a character index or assets, routing each
    question to a narrative tool; else (several books, neither index nor assets) the plain
    ``BookQueryEngine`` of ``build_query_engine(s, book_ids, **kwargs)``.

    ``assets``: an ``AssetStore`` the caller holds open (the chat UI's, which keeps the embedded
    lock for its life); without it the engine opens its own and ``close()`` closes it."""
    from litrag.ingestion.library import Library
    from litrag.narrative.engine import NarrativeQueryEngine
    from litrag.narrative.index import load_index
    from litrag.narrative.tools import NarrativeTools

    records = kwargs.pop("records", None)
    if records is None:
        records = Library.read_registry(s.home)
    engine = build_query_engine(s, book_ids, records=records, **kwargs)
    ids = [book_ids] if isinstance(book_ids, str) else list(book_ids)
    limit = engine.retriever.upto_chapter
    if len(ids) != 1 or not (limit is None or isinstance(limit, int)):
        return engine
    book_id = ids[0]
    index = load_index(s.home, book_id)
    shared = assets is not None
    if assets is None:
        assets = open_asset_store(s)
    if assets is not None and not assets.has_book(book_id):
        if not shared:
            assets.close()
        assets = None
    if index is None and assets is None:
        return engine
    record = next((r for r in records if r.book_id == book_id), None)
    tools = NarrativeTools(
        book_id, assets=assets, blocks=engine.retriever, index=index, upto_chapter=limit
    )
    return NarrativeQueryEngine(
        tools,
        engine,
        index=index,
        chapters=record.chapters if record is not None else None,
        use_agent=use_agent,
        owns_assets=not shared,
    )
