"""Settings: one validated model, filled from the environment and the command line, read once.

Every backend is chosen by environment variables or CLI flags, never by editing code;
``litrag.builders`` builds the models and stores from these settings. ``LITRAG_HOME`` (data
directory, default ``~/.litrag``), ``QDRANT_URL`` / ``QDRANT_API_KEY`` (a Qdrant server instead
of the embedded store), ``LITRAG_LLM_URL`` / ``LITRAG_LLM_MODEL`` (an OpenAI-compatible server
such as ``vllm serve``), ``LITRAG_LLM_BACKEND`` (the client that talks to it: ``openai-like``,
``vllm`` or ``local``; see ``litrag.models.served``), ``LITRAG_LLM_API_KEY`` (the server's key),
``LITRAG_LLM_TEMPERATURE``, ``LITRAG_SEGMENT_URL`` / ``LITRAG_SEGMENT_MODEL`` (another server
for segmentation, through the same backend), ``LITRAG_EMBED_MODEL`` (``minilm``, the ``fast``
preset; ``nomic``, the ``quality`` preset; or a sentence-transformers folder), ``LITRAG_EMBED_URL``
(a served embedder), ``LITRAG_RERANK_URL`` (a served reranker, with ``LITRAG_RERANK_MODEL``,
``_API_KEY``, ``_CANDIDATES``, ``_TIMEOUT``).
Answering: ``LITRAG_LOCAL_LLM`` (the packaged model started when no URL is set:
``qwen2.5-coder-1.5b``, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, or ``smollm2``),
``LITRAG_MODELS`` (its folder), ``LITRAG_LLM_TIMEOUT`` (seconds), ``LITRAG_LLM_CONTEXT`` (tokens),
``LITRAG_RETRIEVAL`` (preset, with ``LITRAG_RETRIEVAL_<FIELD>`` overrides; see
``litrag.retrieval.retriever``), ``LITRAG_PASSAGE_ORDER`` (``score`` or ``story``: the order of the
passages in the answer prompt), ``LITRAG_READ_WORDS`` (words the LLM reads in all, the best
blocks whole; ``0``: every block; default: 650 for the packaged local model, all for a server),
``LITRAG_LLM_TOOLS`` (the server's model calls functions: an agent picks the narrative tools).
Serving: ``LITRAG_API_KEY`` (the Bearer key `litrag serve-api` asks of its clients),
``LITRAG_ALLOWED_HOSTS`` (the Host names served), ``LITRAG_TRUSTED_PROXIES`` (whose
X-Forwarded-For the rate limit believes).

Why one model: a bad value (a negative timeout, a path that is a file, an unknown
``LITRAG_RETRIEVAL_*`` name) is refused when the settings are read, with one line naming the
variable or flag (``SettingsError``), instead of a traceback deep inside a backend or a silent
default. Only the standard library and pydantic load here: every command reads settings before it
decides what else to import.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_COLLECTION = "litrag"
RETRIEVAL_PRESETS = ("embedded", "paper")  # litrag.retrieval.retriever.PRESETS (a test checks it)
# Embedder presets (LITRAG_EMBED_MODEL takes either name): the packaged MiniLM, windowed, or
# nomic-embed-text-v1.5 on llama.cpp (litrag.models.nomic; docs/lab/, issue 30).
EMBED_PRESETS = {"fast": "minilm", "quality": "nomic"}
# The packaged llama.cpp models by name (local_model_path's). The 1.5B model is
# Qwen2.5-Coder-1.5B-Instruct; "qwen2.5-1.5b" and "qwen" are its older aliases.
LOCAL_MODELS = ("qwen2.5-coder-1.5b", "smollm2")
LOCAL_MODEL_ALIASES = {"qwen2.5-1.5b": "qwen2.5-coder-1.5b", "qwen": "qwen2.5-coder-1.5b"}
# LITRAG_RETRIEVAL_<FIELD>: the RetrievalSettings fields the environment may override.
RETRIEVAL_FIELDS: dict[str, type] = {
    "mode": str,
    "dense_top_k": int,
    "sparse_top_k": int,
    "alpha": float,
    "bm25_windows": float,
    "candidates": int,
    "top_k": int,
    "rank_through": str,
    "child_top_k": int,
}

_RETRIEVAL_CHOICES = {
    "rank_through": ("children", "blocks"),
}


# Values read as given: a key, and prefixes whose trailing space is part of them ("query: ").
_KEEP_SPACES = ("qdrant_api_key", "embed_query_prefix", "embed_doc_prefix")


class SettingsError(ValueError):
    """A setting (environment variable or flag) holds a value litrag cannot use; the message is
    one line that starts with the variable's or flag's name."""


# LITRAG_* variables read outside ENV_VARS: by the helpers below, and by the shell scripts in
# scripts/ (installing, deploying); known, so the environment check does not refuse them.
OTHER_VARS = tuple(
    f"LITRAG_{n}"
    for n in """DEBUG DATA WORDNET BERTSCORE_MODEL GGUF_CONVERTER EXTRAS SETUP_FORCE
    LLAMA_CMAKE_ARGS WHEELHOUSE VLLM_HOST VLLM_PORT VLLM_STARTUP GEN_MAX_LEN SEG_MAX_LEN""".split()
)


def known_variables() -> tuple[str, ...]:
    """Every ``LITRAG_*`` name litrag or its scripts read."""
    own = [v for v in ENV_VARS.values() if v.startswith("LITRAG_")]
    retrieval = [f"LITRAG_RETRIEVAL_{k.upper()}" for k in RETRIEVAL_FIELDS]
    return (*own, *retrieval, *OTHER_VARS)


def check_environment(environ: dict[str, str] | None = None) -> None:
    """Refuse an unknown ``LITRAG_*`` variable, naming the nearest known one: a mistyped
    name (an S added to ``LITRAG_LLM_TIMEOUT``) would otherwise be ignored and the default used."""
    env = os.environ if environ is None else environ
    known = known_variables()
    for var in sorted(env):
        if not var.startswith("LITRAG_") or var in known:
            continue
        raise SettingsError(f"unknown setting {var}{_nearest(var, known)}")


def _nearest(var: str, known: Sequence[str]) -> str:
    """``; did you mean X?`` for the known name nearest ``var`` (compared without the shared
    ``LITRAG_`` prefix, which would make every name look alike), or nothing."""
    tails = {k.removeprefix("LITRAG_"): k for k in known}
    near = difflib.get_close_matches(var.removeprefix("LITRAG_"), list(tails), n=1, cutoff=0.6)
    return f"; did you mean {tails[near[0]]}?" if near else ""


def home() -> Path:
    """The data directory: index, docstore, caches, models and logs live under it. A ``~user``
    that names no user here is left unexpanded (``Settings`` refuses it in one line)."""
    path = Path(os.environ.get("LITRAG_HOME") or Path.home() / ".litrag")
    try:
        return path.expanduser()
    except RuntimeError:  # "Could not determine home directory"
        return path


# The clients an LLM can be reached through (``litrag.models.served`` builds them):
# openai-like: llama-index-llms-openai-like against any OpenAI-compatible server (vllm serve,
# llama.cpp); vllm: llama-index-llms-vllm (VllmServer against vllm serve, or in-process Vllm for
# segmentation); local: the packaged llama.cpp model, started on demand.
LLM_BACKENDS = ("openai-like", "vllm", "local")


# The order of the passages in the answer prompt: by score (best first) or as in the story.
DEFAULT_PASSAGE_ORDER: Literal["score", "story"] = "score"


# Variables read on their own, where a whole Settings would be too much (an error handler, the
# evaluation's data folder, a tool's path): read here too, so no other module touches os.environ.
def debug() -> bool:
    """``LITRAG_DEBUG``: let unforeseen errors raise with their traceback. Read as the boolean
    settings are: ``LITRAG_DEBUG=0`` (or false, no, off, empty) keeps them off."""
    return os.environ.get("LITRAG_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


def data_dir() -> Path:
    """``LITRAG_DATA``: the evaluation data (books, GutenQA, question sets).

    Default: the ``data/`` folder of the checkout this package runs from, so a clone needs
    nothing beside it.
    """
    return Path(os.environ.get("LITRAG_DATA") or Path(__file__).resolve().parents[1] / "data")


def wordnet_dir() -> str | None:
    """``LITRAG_WORDNET``: a WordNet 3.0 dict folder for METEOR, if set."""
    return os.environ.get("LITRAG_WORDNET") or None


def bertscore_model() -> str | None:
    """``LITRAG_BERTSCORE_MODEL``: the local model BERTScore reads, if set."""
    return os.environ.get("LITRAG_BERTSCORE_MODEL") or None


def gguf_converter() -> str | None:
    """``LITRAG_GGUF_CONVERTER``: llama.cpp's ``convert_hf_to_gguf.py`` (or its folder), if set."""
    return os.environ.get("LITRAG_GGUF_CONVERTER") or None


def qdrant_url() -> str | None:
    """``QDRANT_URL``: a Qdrant server instead of the embedded store, if set."""
    return os.environ.get("QDRANT_URL", "").strip() or None


def _check_folder(path: Path, must_exist: bool) -> Path:
    """``path`` expanded; refused when it (or the nearest part of it that exists) is no folder."""
    if not str(path).strip():  # LITRAG_HOME='   ' made a folder named by three spaces
        raise ValueError(f"must be a folder, but {str(path)!r} is blank")
    try:
        path = Path(path).expanduser()
    except RuntimeError:  # ~nosuchuser: Path.expanduser's "Could not determine home directory"
        user = str(path).split("/", 1)[0]
        raise ValueError(f"must be a folder, but {user} names no user on this machine") from None
    probe = path
    while not probe.exists() and probe != probe.parent:
        if must_exist:
            raise ValueError(f"must be an existing folder, but {path} does not exist")
        probe = probe.parent
    if not probe.is_dir():
        what = "it" if probe == path else f"{probe}"
        raise ValueError(f"must be a folder, but {what} is a file")
    kernel = _kernel_filesystem(probe)
    if kernel is not None:  # root may "write" /proc, but no folder can be made there
        raise ValueError(
            f"must be a folder litrag can write, but {path} lies in {kernel} (a kernel filesystem)"
        )
    if probe != path and not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"cannot be created: {probe} is not writable")
    return path


_KERNEL_FILESYSTEMS = (Path("/proc"), Path("/sys"))


def _kernel_filesystem(path: Path) -> Path | None:
    """The kernel filesystem (``/proc``, ``/sys``) ``path`` lies in, or None."""
    try:
        real = path.resolve()
    except OSError:
        return None
    for root in _KERNEL_FILESYSTEMS:
        if real == root or root in real.parents:
            return root
    return None


def _check_url(url: str | None, schemes: tuple[str, ...]) -> str | None:
    if url is not None and not url.startswith(schemes):
        raise ValueError(f"must be a URL starting with {' or '.join(schemes)}")
    return url


class Settings(BaseModel):
    """What every command runs with. ``Settings()`` reads the environment for each field not
    given; ``Settings(names_={...})`` says which flag a given value came from, for the error."""

    model_config = ConfigDict(extra="forbid")

    home: Path = Field(default_factory=home, description="Data directory (LITRAG_HOME).")
    qdrant_url: str | None = Field(
        default=None,
        description="A Qdrant server instead of the embedded store (QDRANT_URL).",
        json_schema_extra={"env": "QDRANT_URL"},
    )
    qdrant_api_key: str | None = Field(
        default=None,
        description="Its API key (QDRANT_API_KEY).",
        json_schema_extra={"env": "QDRANT_API_KEY"},
    )
    qdrant_shard_by_book: bool = Field(
        default=False,
        description="A new server collection is sharded by book: a custom shard key per book "
        "(LITRAG_QDRANT_SHARD_BY_BOOK); an existing collection keeps how it was made.",
    )
    qdrant_shard_groups: int | None = Field(
        default=None,
        ge=1,
        description="Sharding by book over this many book groups (shard keys) instead of one "
        "key per book (LITRAG_QDRANT_SHARD_GROUPS; implies sharding by book).",
    )
    ray_address: str | None = Field(
        default=None,
        description="Ingest on the Ray cluster at this address (LITRAG_RAY_ADDRESS, or "
        "`litrag ingest --ray ADDRESS`; `local`: a cluster of this machine). Needs litrag[scale].",
    )
    llm_url: str | None = Field(
        default=None, description="An OpenAI-compatible LLM server (LITRAG_LLM_URL)."
    )
    llm_model: str = Field(default="local", description="Its model name (LITRAG_LLM_MODEL).")
    segment_url: str | None = Field(
        default=None,
        description="A separate server for segmentation (LITRAG_SEGMENT_URL); None: llm_url.",
    )
    segment_model: str | None = Field(
        default=None, description="Its model name (LITRAG_SEGMENT_MODEL); None: llm_model."
    )
    llm_backend: Literal["openai-like", "vllm", "local"] | None = Field(
        default=None,
        description="The client for every LLM call (LITRAG_LLM_BACKEND); None: see llm_backend().",
    )
    llm_api_key: str | None = Field(
        default=None, description="Sent as a Bearer token, as vllm serve --api-key wants."
    )
    api_key: str | None = Field(
        default=None,
        description="The key `litrag serve-api` asks of its clients (LITRAG_API_KEY, --api-key), "
        "as `Authorization: Bearer KEY`, and `litrag chat` as its login password; needed to "
        "serve on an address other than loopback. Printable ASCII without spaces: a client "
        "sends it in an HTTP header, where any other character could never match.",
    )
    allowed_hosts: str | None = Field(
        default=None,
        description="Host names the API and the chat answer to, comma-separated "
        "(LITRAG_ALLOWED_HOSTS, --allowed-hosts; '*': any); None: localhost, 127.0.0.1, ::1 "
        "and the bound address (any, when bound to 0.0.0.0 or ::). Why: a web page on another "
        "site can rebind its own name to 127.0.0.1 and read a keyless local server.",
    )
    trusted_proxies: str | None = Field(
        default=None,
        description="Addresses of reverse proxies whose X-Forwarded-For `litrag serve-api` "
        "believes, comma-separated (LITRAG_TRUSTED_PROXIES, --trusted-proxy); None: none, the "
        "rate limit counts each socket's peer (a forged header cannot make a client new).",
    )
    llm_temperature: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Answering temperature (LITRAG_LLM_TEMPERATURE); None: 0.7 for a server "
        "(Qwen3's advice), 0 for the local model.",
    )
    embed_model: str = Field(
        default="minilm",
        description="'minilm' (packaged; preset 'fast'), 'nomic' (nomic-embed-text-v1.5, "
        "litrag[quality]; preset 'quality') or a sentence-transformers folder "
        "(LITRAG_EMBED_MODEL).",
    )
    embed_backend: Literal["auto", "torch", "openvino"] = Field(
        default="auto",
        description="What runs the embedding model (LITRAG_EMBED_BACKEND): openvino where "
        "installed and the model fits, else torch (see litrag.models.embedders.WindowedEmbedding).",
    )
    embed_precision: Literal["f32", "bf16"] = Field(
        default="f32",
        description="OpenVINO's arithmetic (LITRAG_EMBED_PRECISION): f32 gives torch's vectors.",
    )
    embed_threads: int | None = Field(
        default=None,
        ge=1,
        description="CPU threads of the llama.cpp embedder (nomic; LITRAG_EMBED_THREADS); None: "
        "every core. Where other jobs share the cores, 1 was 2.3x faster than 2 (its threads "
        "wait for each other).",
    )
    embed_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible embedding server's /v1 base (LITRAG_EMBED_URL: vllm "
        "serve, llama.cpp's server with --embedding, infinity); set, it embeds instead of "
        "LITRAG_EMBED_MODEL (litrag.models.served_embeddings).",
    )
    embed_api_key: str | None = Field(
        default=None, description="The embedding server's key (LITRAG_EMBED_API_KEY)."
    )
    embed_served_model: str | None = Field(
        default=None,
        description="The served embedding model's name (LITRAG_EMBED_SERVED_MODEL); None: the "
        "server's only model.",
    )
    embed_query_prefix: str | None = Field(
        default=None,
        description="Put before each question embedded by the server "
        "(LITRAG_EMBED_QUERY_PREFIX); None: the model family's (Qwen3-Embedding's instruction, "
        "nomic's 'search_query: ', e5's 'query: ').",
    )
    embed_doc_prefix: str | None = Field(
        default=None,
        description="Put before each passage embedded by the server (LITRAG_EMBED_DOC_PREFIX); "
        "None: the model family's.",
    )
    embed_batch: int = Field(
        default=32, ge=1, le=2048, description="Texts per request to the embedding server."
    )
    embed_timeout: float = Field(
        default=60.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds one embedding request may take (LITRAG_EMBED_TIMEOUT); the client "
        "retries twice with backoff.",
    )
    rerank_url: str | None = Field(
        default=None,
        description="A /rerank server's /v1 base (LITRAG_RERANK_URL: vllm serve, llama-server "
        "--reranking, infinity); set, it reranks every question's fused candidates.",
    )
    rerank_api_key: str | None = Field(default=None, description="LITRAG_RERANK_API_KEY.")
    rerank_model: str | None = Field(
        default=None, description="LITRAG_RERANK_MODEL; None: the server's only model."
    )
    rerank_candidates: int = Field(
        default=20, ge=1, le=1000, description="Fused candidates sent (LITRAG_RERANK_CANDIDATES)."
    )
    rerank_timeout: float = Field(
        default=10.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds the server may take before the fused order is kept, with one "
        "warning (LITRAG_RERANK_TIMEOUT).",
    )
    segmenter: Literal["offline", "litseg-lite", "litseg"] | None = Field(
        default=None,
        description="None: litseg-lite when an LLM is configured, else offline.",
        json_schema_extra={"env": None},
    )
    workers: int = Field(
        default=4,
        ge=1,
        description="LLM calls in flight while segmenting.",
        json_schema_extra={"env": None},
    )
    collection: str = Field(
        default=DEFAULT_COLLECTION,
        min_length=1,
        description="Collection.",
        json_schema_extra={"env": None},
    )
    max_mb: float = Field(
        default=16.0,
        gt=0,
        allow_inf_nan=False,
        description="Books larger than this are refused.",
        json_schema_extra={"env": None},
    )
    retrieval: Literal["embedded", "paper"] = Field(
        default="embedded", description="Retrieval preset (LITRAG_RETRIEVAL)."
    )
    retrieval_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="LITRAG_RETRIEVAL_<FIELD> values, checked by retrieval_overrides().",
        json_schema_extra={"env": None},
    )
    top_k: int | None = Field(
        default=None,
        ge=1,
        description="Blocks given to the LLM (--top-k); None: the preset's.",
        json_schema_extra={"env": None},
    )
    passage_order: Literal["score", "story"] = Field(
        default=DEFAULT_PASSAGE_ORDER,
        description="Order of the passages in the answer prompt (LITRAG_PASSAGE_ORDER).",
    )
    read_words: int | None = Field(
        default=None, ge=0, description="Words the LLM reads (0: all); None: see read_words()."
    )
    local_llm: Literal["qwen2.5-coder-1.5b", "smollm2"] = Field(
        default="qwen2.5-coder-1.5b",
        description="The packaged model started without a URL ('qwen2.5-1.5b' and 'qwen' are "
        "accepted for qwen2.5-coder-1.5b).",
    )
    llm_timeout: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Seconds the LLM may be silent; None: 120 for a server, 900 for the local one.",
    )
    llm_context: int = Field(default=4096, ge=256, description="Context window, tokens.")
    models_dir: Path | None = Field(
        default=None,
        description="Where packaged models are assembled; None: <home>/models (LITRAG_MODELS).",
        json_schema_extra={"env": "LITRAG_MODELS"},
    )
    characters: bool = Field(
        default=True,
        description="Build the character index at ingest where litrag[narrative] is installed "
        "(LITRAG_CHARACTERS).",
    )
    children: bool = Field(
        default=True,
        description="Store each book's paragraph children at ingest, its blocks snapped to them, "
        "so retrieval ranks blocks through their paragraphs (LITRAG_CHILDREN).",
    )
    llm_tools: bool = Field(
        default=False,
        description="The server's model calls functions (e.g. `vllm serve --enable-auto-tool-"
        "choice`; LITRAG_LLM_TOOLS, openai-like backend): routed answers let it call the "
        "narrative tools itself instead of the question router.",
    )

    def __init__(self, names_: dict[str, str] | None = None, **data: Any) -> None:
        check_environment()
        names = dict(names_ or {})
        raw: dict[str, Any] = {}
        for name, var in ENV_VARS.items():
            if name in data:
                continue
            value = os.environ.get(var, "")
            if value.strip() and name not in _KEEP_SPACES:
                value = value.strip()
            if value:
                raw[name] = value
                names.setdefault(name, var)
        if "retrieval_overrides" not in data:
            data["retrieval_overrides"] = retrieval_overrides()
        try:
            super().__init__(**raw, **data)
        except ValidationError as exc:
            raise SettingsError(_explain(exc, {**raw, **data}, names)) from None

    @field_validator("home")
    @classmethod
    def _home_is_a_folder(cls, v: Path) -> Path:
        return _check_folder(v, must_exist=False)

    @field_validator("models_dir")
    @classmethod
    def _models_is_a_folder(cls, v: Path | None) -> Path | None:
        return None if v is None else _check_folder(v, must_exist=False)

    @field_validator("embed_model")
    @classmethod
    def _embed_model_exists(cls, v: str) -> str:
        v = EMBED_PRESETS.get(v, v)
        if v in EMBED_PRESETS.values():
            return v
        path = Path(v).expanduser()
        if not path.is_dir():
            state = "is a file" if path.exists() else "does not exist"
            raise ValueError(
                f"must be minilm, nomic (presets fast, quality) or a sentence-transformers "
                f"folder, but {v} {state}"
            )
        return str(path)

    @field_validator("qdrant_url")
    @classmethod
    def _qdrant_url(cls, v: str | None) -> str | None:
        return _check_url(v, ("http://", "https://", "path:"))

    @field_validator("llm_url", "segment_url", "rerank_url")
    @classmethod
    def _llm_url(cls, v: str | None) -> str | None:
        return _check_url(v, ("http://", "https://"))

    @field_validator("api_key")
    @classmethod
    def _api_key_can_match(cls, v: str | None) -> str | None:
        if v is not None and not (v and all("!" <= ch <= "~" for ch in v)):
            raise ValueError(
                "must be printable ASCII without spaces (a client sends it in an HTTP header, "
                "where any other character can never match)"
            )
        return v

    @field_validator("allowed_hosts", "trusted_proxies")
    @classmethod
    def _names_listed(cls, v: str | None) -> str | None:
        if v is None:
            return v
        names = [n.strip() for n in v.split(",") if n.strip()]
        if not names:
            raise ValueError("must name at least one host, comma-separated")
        return ",".join(names)

    @field_validator("llm_backend", mode="before")
    @classmethod
    def _backend_lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("local_llm", mode="before")
    @classmethod
    def _local_alias(cls, v: Any) -> Any:
        """The model by its real name: the older 'qwen2.5-1.5b' still works."""
        return LOCAL_MODEL_ALIASES.get(v, v) if isinstance(v, str) else v


def _env_var(name: str) -> str | None:
    """The environment variable of a settings field: ``LITRAG_<FIELD>``, unless the field names
    another (``json_schema_extra={"env": ...}``; None: the field is not read from it)."""
    extra = Settings.model_fields[name].json_schema_extra
    if isinstance(extra, dict) and "env" in extra:
        return extra["env"]  # type: ignore[return-value]
    return f"LITRAG_{name.upper()}"


# field -> environment variable, derived from the model: one place says both
ENV_VARS: dict[str, str] = {n: v for n in Settings.model_fields if (v := _env_var(n)) is not None}


def llm_backend(s: Settings) -> str:
    """The LLM client in use: the configured one, else ``openai-like`` when a server URL is set,
    else ``local`` (the packaged model)."""
    if s.llm_backend is not None:
        return s.llm_backend
    return "openai-like" if s.llm_url else "local"


def retrieval_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``LITRAG_RETRIEVAL_<FIELD>`` variables, typed and in range; an unknown name or a bad
    value is a ``SettingsError`` naming the variable."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    known = [f"LITRAG_RETRIEVAL_{k.upper()}" for k in RETRIEVAL_FIELDS]
    for var, raw in sorted(env.items()):
        if not var.startswith("LITRAG_RETRIEVAL_"):
            continue
        key = var[len("LITRAG_RETRIEVAL_") :].lower()
        if key not in RETRIEVAL_FIELDS:
            hint = _nearest(var, known) or f"; the known ones: {', '.join(known)}"
            raise SettingsError(f"unknown setting {var}{hint}")
        value = raw.strip()
        if not value:
            continue
        kind = RETRIEVAL_FIELDS[key]
        if key == "mode":
            if value not in ("hybrid", "dense", "sparse"):
                raise SettingsError(f"{var} must be one of hybrid, dense, sparse, got {raw!r}")
            out[key] = value
            continue
        if key in _RETRIEVAL_CHOICES:
            if value not in _RETRIEVAL_CHOICES[key]:
                choices = ", ".join(_RETRIEVAL_CHOICES[key])
                raise SettingsError(f"{var} must be one of {choices}, got {raw!r}")
            out[key] = value
            continue
        try:
            number = kind(value)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise SettingsError(f"{var} must be {what}, got {raw!r}") from None
        if key in ("alpha", "bm25_windows") and not 0.0 <= number <= 1.0:
            raise SettingsError(f"{var} must be between 0 and 1, got {raw!r}")
        if kind is int and number < 1:
            raise SettingsError(f"{var} must be at least 1, got {raw!r}")
        out[key] = number
    return out


_TYPE_WORDS = {
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "path_type": "must be a path",
    "string_type": "must be text",
    # pydantic's words ("Input should be a valid boolean, unable to interpret input") name
    # neither the values it takes nor the setting's kind
    "bool_parsing": "must be true or false (also 1/0, yes/no, on/off)",
    "bool_type": "must be true or false (also 1/0, yes/no, on/off)",
}


def _explain(exc: ValidationError, given: dict[str, Any], names: dict[str, str]) -> str:
    """The first error of ``exc`` as one line: ``NAME must be ..., got VALUE``."""
    err = exc.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    name = names.get(field, field)
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _TYPE_WORDS:
        why = _TYPE_WORDS[kind]
    elif kind == "greater_than":
        why = f"must be greater than {ctx['gt']}"
    elif kind == "greater_than_equal":
        why = f"must be at least {ctx['ge']}"
    elif kind in ("less_than_equal", "less_than"):
        why = f"must be at most {ctx.get('le', ctx.get('lt'))}"
    elif kind == "literal_error":
        why = f"must be one of {ctx.get('expected', '')}".replace("'", "")
    elif kind == "extra_forbidden":
        return f"{name} is not a setting"
    elif kind == "value_error":
        why = str(ctx.get("error", err["msg"]))
    else:
        why = err["msg"]
    if field.endswith("api_key"):  # a secret is never echoed
        return f"{name} {why}"
    value = given.get(field, err.get("input"))
    shown = value if isinstance(value, str) else str(value)
    if kind == "value_error" and shown in why:  # the message already names the value
        return f"{name} {why}"
    return f"{name} {why}, got {shown!r}"


DEFAULT_READ_WORDS = 650


def read_words(s: Settings) -> int:
    """Words the answering LLM reads: the best blocks whole while they fit, the first always;
    0: every block given. Default 650 for the packaged local model (docs/lab/, "What the
    local model reads", and "The words whole blocks leave" for what was tried since); a
    configured server reads every block."""
    if s.read_words is not None:
        return s.read_words
    return DEFAULT_READ_WORDS if llm_backend(s) == "local" else 0


class ServerUnreachableError(SettingsError):
    """A server a setting names (``QDRANT_URL``, ``LITRAG_LLM_URL``) does not answer."""

    def __init__(self, name: str, what: str, url: str, reason: str, fix: str) -> None:
        super().__init__(f"{name}: the {what} at {url} is unreachable ({reason}): {fix}")


def unreachable_reason(exc: BaseException) -> str | None:
    """Why a call to a server failed, when it failed for want of the server (refused, no such
    host, timed out), walking the exception's causes; None for any other failure."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        name = type(cur).__name__
        if isinstance(cur, ConnectionRefusedError) or "refused" in str(cur).lower():
            return "connection refused"
        if isinstance(cur, TimeoutError) or "Timeout" in name:
            return "timed out"
        if name in ("ConnectError", "APIConnectionError", "ResponseHandlingException") or (
            isinstance(cur, OSError) and cur.errno is not None
        ):
            first = str(cur).splitlines()[0] if str(cur) else name
            return first[:120]
        cur = cur.__cause__ or cur.__context__
    return None
