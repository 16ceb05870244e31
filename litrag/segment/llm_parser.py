"""``LLMNodeParser``: what every node parser that asks an LLM shares.

``LitSegNodeParser`` and the LumberChunker and margin-sampling chunkers subclass it. It declares
the LLM and its identity, the reply cache, the timeout and the concurrency once, and runs the
shared plumbing: the LLM's identity from the LLM, the SQLite reply cache (opened and closed per
parse), an ``LLMCaller`` for the LLM, jobs run ``num_workers`` at once with a progress bar, and a
synchronous parse that runs the asynchronous one.

An ``IngestionCache`` key hashes ``str(parser.to_dict())``: every field that is not excluded, in
order. The LLM itself is excluded; ``llm_identity`` stands for it. A subclass lists the order its
fields had before they moved here (``_dump_order``), and ``to_dict`` keeps it, so no key changes.
``from_dict(parser.to_dict(), llm=llm)`` rebuilds the parser (the stock id function included).
"""

from __future__ import annotations

import asyncio
import os
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from llama_index.core.bridge.pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.node_parser.node_utils import default_id_func
from llama_index.core.schema import BaseNode

from litrag.segment.cache import ResponseCache
from litrag.segment.llm_calls import LLMCaller, Sampling, await_all, llm_identity
from litrag.segment.sync import run_sync

T = TypeVar("T")

REPLY_CACHE_FILE = "llm_replies.sqlite"


class LLMNodeParser(NodeParser):
    """A ``NodeParser`` that asks an LLM, with the fields and plumbing its subclasses share."""

    llm: LLM | None = Field(default=None, exclude=True, description="The LLM the parser asks.")
    llm_identity: str = Field(
        default="",
        description="Which LLM answers (class, model, endpoint); part of the ingestion and reply "
        "cache keys. Pass a stable name for a server on a changing port (a local llama.cpp).",
    )
    request_timeout: float | None = Field(
        default=600.0, description="Seconds before an LLM call counts as a failed attempt."
    )
    num_workers: int = Field(
        default=4,
        ge=1,
        description="Jobs calling the LLM at once: units for LitSeg (one call each), documents "
        "for the chunkers (a document's calls are serial).",
    )
    cache_dir: str | None = Field(
        default=None,
        description="Folder of the persistent LLM reply cache; an interrupted run resumes "
        "without repeating finished calls. None disables it.",
    )

    # Without an LLM the parser cannot work at all (LitSeg has an offline segmenter: False).
    _needs_llm: ClassVar[bool] = True
    # The parser's own fields in their order in ``to_dict`` (see the module's docstring).
    _dump_order: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        llm: LLM | None = None,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if llm is None and type(self)._needs_llm:
            raise ValueError(f"{type(self).__name__} needs an llm")
        super().__init__(
            llm=llm,
            llm_identity=kwargs.pop("llm_identity", None)
            or (llm_identity(llm) if llm is not None else ""),
            callback_manager=callback_manager or CallbackManager([]),
            **kwargs,
        )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        unknown = set(cls._dump_order) - set(cls.model_fields)
        if unknown:
            raise TypeError(f"{cls.__name__}._dump_order names no field: {sorted(unknown)}")

    @classmethod
    def class_name(cls) -> str:
        return "LLMNodeParser"

    @field_validator("cache_dir", mode="before")
    @classmethod
    def _cache_dir_as_str(cls, value: object) -> object:
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("id_func", mode="before")
    @classmethod
    def _id_func_from_dict(cls, value: object) -> object:
        # ``to_dict`` writes the id function by name; ``from_dict`` can restore the default one
        if isinstance(value, dict) and "id_func_name" in value:
            if value["id_func_name"] != default_id_func.__name__:
                raise ValueError(f"id_func {value['id_func_name']!r}: pass it to from_dict")
            return default_id_func
        return value

    @model_serializer(mode="wrap")
    def custom_model_dump(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data = handler(self)
        rank = {name: i for i, name in enumerate(self._dump_order)}
        first = set(NodeParser.model_fields)  # the stock fields lead, as pydantic orders them

        def place(key: str) -> int:
            return -1 if key in first else rank.get(key, len(rank))

        out = {key: data[key] for key in sorted(data, key=place)}  # stable: ties keep order
        out["class_name"] = self.class_name()
        return out

    # -- shared plumbing -------------------------------------------------------------------

    @contextmanager
    def _reply_cache(self) -> Iterator[ResponseCache | None]:
        """The persistent reply cache in ``cache_dir`` (None without one), closed after use."""
        cache = ResponseCache(Path(self.cache_dir) / REPLY_CACHE_FILE) if self.cache_dir else None
        try:
            yield cache
        finally:
            if cache is not None:
                cache.close()

    def _caller(self, sampling: Sampling, cache: ResponseCache | None) -> LLMCaller:
        """An ``LLMCaller`` for the LLM, under ``llm_identity`` when one was given."""
        if self.llm is None:
            raise ValueError(f"{type(self).__name__} needs an llm for this")
        caller = LLMCaller(self.llm, sampling, self.request_timeout, cache)
        caller.identity = self.llm_identity or caller.identity  # a caller's stable name wins
        return caller

    async def _gather(
        self, jobs: Sequence[Callable[[], Awaitable[T]]], show_progress: bool, desc: str
    ) -> list[T]:
        """Every job's result, in order; ``num_workers`` jobs run at once. On an error the jobs
        still running are cancelled, so no call outlives the parse."""
        gate = asyncio.Semaphore(self.num_workers)

        async def run(job: Callable[[], Awaitable[T]]) -> T:
            async with gate:
                return await job()

        tasks = [asyncio.ensure_future(run(job)) for job in jobs]
        await await_all(tasks, show_progress=show_progress, desc=desc)
        return [task.result() for task in tasks]

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        return run_sync(self._aparse_nodes(nodes, show_progress=show_progress, **kwargs))

    @abstractmethod
    async def _aparse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]: ...
