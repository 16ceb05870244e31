"""Opening a Qdrant Edge collection: its saved config checked, its shard loaded or created.

Edge takes an exclusive lock on a shard's WAL, so one process (one store object) opens it at a
time; the owner file says who, so a second opener's ``StoreLockedError`` can name the holder.
A config that is missing, damaged or disagrees with the shard is a ``StoreConfigError``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import qdrant_edge as qe

from litrag.models.disk_space import allocates_eagerly, need_space
from litrag.stores.edge_schema import (
    CONFIG_FILE,
    PAYLOAD_SCHEMA,
    SHARD_DIR,
    EdgeStoreConfig,
    config_mismatch,
    edge_config,
    is_lock_error,
    read_config,
    read_owner,
    shard_config_path,
    shard_dense_dim,
    write_config,
    write_owner,
)

logger = logging.getLogger(__name__)

# Free space a new collection takes on a filesystem that allocates its memory-mapped files
# whole (tmpfs): its WAL segment and the 32 MiB chunks of its first segment (measured: 96 MB).
NEW_STORE_BYTES = 100 * 2**20
WINDOW_VECTOR_NAME = "text-windows"  # of a new collection that keeps sentence-window vectors


class StoreLockedError(RuntimeError):
    """Another process (or another store object in this one) holds the shard folder.

    Edge takes an exclusive lock on a shard's WAL: one opener at a time. Concurrent writers need a
    Qdrant server (``QDRANT_URL``).
    """

    def __init__(self, folder: Path, holder: str | None = None) -> None:
        self.folder = folder
        self.holder = holder
        who = f"held by {holder}" if holder else "held by another process"
        super().__init__(
            f"Qdrant Edge store {folder} is {who}: one process may open an embedded store at a "
            "time; close it or go through that process, or use a Qdrant server for concurrent "
            "writers (set QDRANT_URL)."
        )


class StoreConfigError(ValueError):
    """``litrag_store.json`` is missing, damaged or disagrees with the shard it describes.

    Why not recreate it with defaults: a default config has no window vector name, so dense
    search would silently use the per-block vectors and cite other passages.
    """

    def __init__(self, folder: Path, problem: str) -> None:
        self.folder = folder
        super().__init__(f"{problem}: run `litrag verify --repair` (rebuilds it from the shard)")


class StoreDamagedError(ValueError):
    """The engine cannot load the shard: one of its files is cut short or overwritten (Edge
    says "Service runtime error: ..." or panics). One line naming the shard and the repair,
    instead of the engine's error with no advice."""

    def __init__(self, folder: Path, reason: str) -> None:
        self.folder = folder
        super().__init__(
            f"the store {folder / SHARD_DIR} is damaged ({reason}): run `litrag verify --repair` "
            "(sets it aside and ingests the books again from their sources)"
        )


class StoreReadOnlyError(PermissionError):
    """The store's folder cannot be written: a read-only filesystem or another user's folder.
    Edge opens its files for writing even to search them, so it failed with "Read-only file
    system" and the library was reported as damaged, with a repair that could only fail."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        why = "on a read-only filesystem" if read_only_fs(folder) else "not writable by this user"
        super().__init__(
            f"the library's store {folder} is {why}: the embedded store opens its files for "
            "writing even to search them, so it cannot be opened there (nothing is damaged); "
            "make the folder writable, or copy the library to a writable folder and set "
            "LITRAG_HOME to it"
        )

    def __str__(self) -> str:
        return str(self.args[0])


def read_only_fs(path: Path) -> bool:
    """Whether ``path`` (or the nearest folder above it that exists) is on a read-only mount."""
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_writable(folder: Path) -> None:
    """``StoreReadOnlyError`` when the collection's folder exists and cannot be written."""
    shard = folder / SHARD_DIR
    probe = shard if shard.is_dir() else folder
    if probe.is_dir() and (read_only_fs(probe) or not os.access(probe, os.W_OK | os.X_OK)):
        raise StoreReadOnlyError(folder)


def shard_damage(exc: BaseException) -> str:
    """The first line of the engine's reason a shard did not load, made short."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return first.removeprefix("Service runtime error: ")[:200]


def is_engine_failure(exc: BaseException) -> bool:
    """An error of the engine (a Rust panic is a ``BaseException``), not ours to pass on."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


def resolve_config(
    folder: Path,
    config: EdgeStoreConfig | None,
    dense_dim: int | None,
    windowed: bool,
) -> EdgeStoreConfig:
    """The config of the collection in ``folder``: the saved one (which ``config`` and
    ``dense_dim``, when given, must agree with), else ``config`` or the defaults, with the window
    vector name set for a ``windowed`` new collection. The dense size is filled in from
    ``dense_dim`` while unknown."""
    try:
        saved = read_config(folder)
    except ValueError:
        raise StoreConfigError(
            folder, f"the store config {folder / CONFIG_FILE} is damaged"
        ) from None
    if saved is None and shard_config_path(folder).exists():
        raise StoreConfigError(folder, f"the store config {folder / CONFIG_FILE} is missing")
    wrong = config_mismatch(folder, saved) if saved is not None else None
    if wrong:
        raise StoreConfigError(folder, f"{folder}: {wrong}")
    if saved is not None:
        if config is not None and config.model_dump(exclude={"dense_dim"}) != saved.model_dump(
            exclude={"dense_dim"}
        ):
            raise ValueError(f"{folder}: config differs from the one saved in {CONFIG_FILE}")
        if dense_dim is not None and saved.dense_dim not in (None, dense_dim):
            raise ValueError(f"{folder}: dense_dim {dense_dim} != saved {saved.dense_dim}")
        cfg = saved
    else:
        cfg = config.model_copy() if config is not None else EdgeStoreConfig()
        if windowed and cfg.window_vector_name is None:
            cfg.window_vector_name = WINDOW_VECTOR_NAME
    if cfg.dense_dim is None and dense_dim is not None:
        cfg.dense_dim = dense_dim
    return cfg


def open_shard(folder: Path, config: EdgeStoreConfig) -> qe.EdgeShard:
    """Load the shard in ``folder``, or create it from ``config``; Edge's lock failure becomes
    ``StoreLockedError`` naming the holder."""
    check_writable(folder)
    need_space(folder, open_needs(folder), f"the store {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    shard_dir = folder / SHARD_DIR
    if not shard_config_path(folder).exists():
        try:
            return qe.EdgeShard.create(str(shard_dir), edge_config(config))
        except Exception as e:
            if is_lock_error(e):
                raise StoreLockedError(folder, read_owner(folder)) from e
            raise
    if config.dense_dim is not None:  # the config's run-time settings (search threads) apply
        try:
            return qe.EdgeShard.load(str(shard_dir), edge_config(config))
        except BaseException as e:
            if not is_engine_failure(e):  # Ctrl-C, SystemExit
                raise
            if is_lock_error(e):
                raise StoreLockedError(folder, read_owner(folder)) from e
            # made with other settings (or damaged): loaded as it was made, or said below
    try:
        return qe.EdgeShard.load(str(shard_dir))
    except BaseException as e:
        if not is_engine_failure(e):  # Ctrl-C, SystemExit
            raise
        if is_lock_error(e):
            raise StoreLockedError(folder, read_owner(folder)) from e
        raise StoreDamagedError(folder, shard_damage(e)) from None


def open_needs(folder: Path) -> int:
    """Free bytes opening the collection in ``folder`` takes: a new one's files on a filesystem
    that allocates memory-mapped files whole (tmpfs), where a full disk was a Bus error (exit
    135, no message) rather than an error. An existing collection only reads on opening (a
    clean 192 MB tmpfs library opens and answers with 9 MB free); its writes are checked by
    the ingest (``Library.check_space``)."""
    if (folder / SHARD_DIR).is_dir() or not allocates_eagerly(folder):
        return 0
    return NEW_STORE_BYTES


def probe_shard(folder: Path) -> str | None:
    """Why the shard in ``folder`` does not load (a file cut short, overwritten), or None: it
    loads, or another process holds it (then its holder has loaded it). Opened and closed
    again at once: what ``litrag verify`` checks before it opens the library."""
    if not shard_config_path(folder).exists():
        return None
    check_writable(folder)  # else its load fails as if the shard were damaged
    try:
        shard = qe.EdgeShard.load(str(folder / SHARD_DIR))
    except BaseException as e:
        if not is_engine_failure(e):
            raise
        return None if is_lock_error(e) else shard_damage(e)
    shard.close()
    return None


def settle_shard(shard: qe.EdgeShard, folder: Path, config: EdgeStoreConfig) -> None:
    """After an open: record this process as the owner, take the dense size from the shard when
    the config lacks it (``config`` is updated), save the config, create missing payload indexes."""
    write_owner(folder)
    if config.dense_dim is None:  # reopened without our JSON: take it from the shard
        config.dense_dim = shard_dense_dim(shard, config.dense_vector_name)
    write_config(folder, config)
    have = set(shard.info().payload_schema)
    for field, kind in config.payload_indexes.items():
        if field not in have:
            shard.update(qe.UpdateOperation.create_field_index(field, PAYLOAD_SCHEMA[kind]))


# What a query reads by page rather than what Edge keeps loaded (its dense vectors and HNSW
# graphs are resident once the shard loads): payloads, payload indexes, sparse vectors and the
# sparse inverted index. Edge 0.9 maps them in "cold" and empties their page cache on close,
# and does not pre-read payloads under the "cached" tier (checked: none of their pages resident
# after a load with payload_memory=Cached), so the first question of a process about a book read
# them page by page from disk: about half of its time (``benchmarks/bench_retrieval_scale.py``).
WARM_DIRS = ("payload_storage", "payload_index", "text-sparse")
_CHUNK = 1 << 20


def warm_files(shard_dir: Path) -> list[Path]:
    """The files of ``shard_dir`` that ``warm_shard`` reads. A folder that goes away while it
    is listed (Edge merges and drops segments as it writes) is passed over (``os.walk``)."""
    found = []
    for folder, _dirs, files in os.walk(shard_dir / "segments"):
        rel = Path(folder).relative_to(shard_dir).parts
        if any(d in part for part in rel for d in WARM_DIRS):
            found += [Path(folder) / name for name in sorted(files)]
    return sorted(found)


def warm_shard(shard_dir: Path, stop: threading.Event | None = None) -> int:
    """Read the files queries page through (``WARM_DIRS``) once, so they are in the page cache
    when the first question comes; returns the bytes read. A file gone or unreadable is
    skipped: this only saves time. ``stop`` set: it ends at the next megabyte."""
    t0, total = time.perf_counter(), 0
    buf = bytearray(_CHUNK)
    for f in warm_files(shard_dir):
        try:
            with f.open("rb", buffering=0) as fh:
                while not (stop is not None and stop.is_set()) and (n := fh.readinto(buf)):
                    total += n
        except OSError:
            continue
        if stop is not None and stop.is_set():
            break
    logger.debug("warmed %s: %.0f MB in %.2f s", shard_dir, total / 2**20, time.perf_counter() - t0)
    return total


def warm_in_background(shard_dir: Path, stop: threading.Event) -> threading.Thread:
    """``warm_shard`` on a daemon thread (the open returns at once; file reads release the GIL),
    until ``stop`` is set: the store's ``close`` sets it and joins the thread, so no thread of
    the store is left running while the interpreter shuts down (issue 50, bug 14)."""
    thread = threading.Thread(
        target=warm_shard, args=(shard_dir, stop), name="edge-warm", daemon=True
    )
    thread.start()
    return thread
