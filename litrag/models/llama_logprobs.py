"""Prompt-token log-probabilities of a GGUF model through llama.cpp's Python API, in process or
in a child process (a fault in llama.cpp then ends the child with a clear error, not the
caller). What the perplexity chunker (``litrag.chunkers.perplexity``) scores sentences with.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


class LlamaCppTokenLogprobs:
    """Prompt-token log-probabilities from a GGUF model through llama.cpp, in process.

    The text is evaluated once with all logits kept (``logits_all``); the log-softmax of row i
    scores token i+1. Windows longer than ``n_ctx`` are the caller's business.
    """

    def __init__(self, model_path: str | Path, n_ctx: int = 2048, n_threads: int | None = None):
        from llama_cpp import Llama

        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.llm = Llama(
            model_path=str(model_path),
            n_ctx=n_ctx,
            n_batch=min(512, n_ctx),
            n_threads=n_threads,
            logits_all=True,
            verbose=False,
        )

    @property
    def name(self) -> str:
        return f"llama.cpp:{self.model_path.name}"

    def tokens(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    def __call__(self, text: str) -> list[tuple[int, float]]:
        ids = self.tokens(text)[: self.n_ctx]  # an over-long window: its tail goes unscored
        if len(ids) < 2:
            return []
        self.llm.reset()
        self.llm.eval(ids)
        logits = np.asarray(self.llm.scores[: len(ids) - 1], dtype=np.float32)
        top = logits.max(axis=1, keepdims=True)
        lse = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
        targets = np.asarray(ids[1:])
        logprobs = logits[np.arange(len(targets)), targets] - lse
        starts = self._char_starts(text, ids)
        return [
            (starts[i + 1], float(lp)) for i, lp in enumerate(logprobs) if starts[i + 1] is not None
        ]

    def _char_starts(self, text: str, ids: Sequence[int]) -> list[int | None]:
        """Char offset where each token starts; None for tokens that add no text (BOS)."""
        byte_to_char = np.zeros(len(text.encode("utf-8")) + 1, dtype=np.int64)
        pos = 0
        for ci, ch in enumerate(text):
            n = len(ch.encode("utf-8"))
            byte_to_char[pos : pos + n] = ci
            pos += n
        byte_to_char[pos] = len(text)
        out: list[int | None] = []
        at = 0
        for tid in ids:
            piece = self.llm.detokenize([tid], special=False)
            if not piece:
                out.append(None)
                continue
            out.append(int(byte_to_char[min(at, pos)]))
            at += len(piece)
        return out


def _serve_logprobs(conn: Any, model_path: str, n_ctx: int, n_threads: int | None) -> None:
    """The child's loop: ``(op, args)`` in, ``("ok", value)`` or ``("error", line)`` out."""
    faulthandler.enable()  # a fault leaves the Python stack on stderr before the child dies
    try:
        scorer = LlamaCppTokenLogprobs(model_path, n_ctx=n_ctx, n_threads=n_threads)
    except Exception as exc:
        conn.send(("error", f"cannot load {model_path}: {type(exc).__name__}: {exc}"))
        return
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        try:
            if op == "ready":
                value: Any = True
            elif op == "tokens":
                value = scorer.tokens(*args)
            else:
                value = scorer(*args)
            conn.send(("ok", value))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ChildTokenLogprobs:
    """``LlamaCppTokenLogprobs`` in a child process, with the same calls.

    llama.cpp runs native code that can fault (an illegal instruction on a CPU the build does
    not suit, memory running out); in process that kills the caller with no Python error. Here
    the child dies instead, and the next call raises ``LocalModelError`` naming the signal and
    what to do. The model is loaded before the constructor returns.
    """

    def __init__(self, model_path: str | Path, n_ctx: int = 2048, n_threads: int | None = None):
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        ctx = multiprocessing.get_context("spawn")  # no forked copy of the caller's threads
        self._conn, child_end = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve_logprobs,
            args=(child_end, str(model_path), n_ctx, n_threads),
            name="llama.cpp-logprobs",
            daemon=True,
        )
        self._proc.start()
        child_end.close()
        self._ask("ready")

    @property
    def name(self) -> str:
        return f"llama.cpp:{self.model_path.name}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def _ask(self, op: str, *args: Any) -> Any:
        from litrag.models.llama_server import LocalModelError, describe_exit

        try:
            self._conn.send((op, args))
            status, value = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join(timeout=5)
            code = self._proc.exitcode
            what = f"the llama.cpp scorer (pid {self._proc.pid})"
            if code is None:
                raise LocalModelError(f"{what} stopped answering") from None
            raise LocalModelError(describe_exit(code, what)) from None
        if status != "ok":
            raise LocalModelError(f"the llama.cpp scorer failed: {value}")
        return value

    def tokens(self, text: str) -> list[int]:
        return self._ask("tokens", text)

    def __call__(self, text: str) -> list[tuple[int, float]]:
        return [tuple(pair) for pair in self._ask("score", text)]  # type: ignore[misc]

    def close(self) -> None:
        self._conn.close()
        self._proc.join(timeout=5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
