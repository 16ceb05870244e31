"""Does a library agree with itself? The registry (``books.json``), the docstore and the store.

Why: a library damaged on disk (a deleted index, a truncated JSON file, a lost store config) used
to answer from what was left ("Nothing in the book matches the question", other citations) with
exit 0. Every command that opens a library now runs the cheap checks here and stops with one line
naming what is wrong and the command that repairs it; ``litrag verify [--repair]`` runs the full
check and re-derives what can be re-derived (see ``litrag.cli.verify``).

- ``check_files``: files only, no store opened (so it works while the chat UI holds the store):
  the registry is readable, the store's shard and its ``litrag_store.json`` exist when the
  registry lists books, the config's vector names are the shard's.
- ``check_store``: an opened store: point counts per book against the registry (an exact count
  on the ``book_id`` payload index, milliseconds), one point per book with non-zero vectors, and
  no points of books the registry does not list.

What the library shares with these checks lives in small modules that import neither of them:
``damage`` (``Problem``, ``LibraryDamagedError``), ``registry`` (``books.json``) and
``book_points`` (a book's filter, its point count, ``BookScan``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litrag.ingestion.book_points import BookScan, count_points
from litrag.ingestion.damage import REPAIR, LibraryDamagedError, Problem, read_json, set_aside
from litrag.ingestion.registry import BookRecord, file_digest, read_registry, read_rows
from litrag.ingestion.removal import journal_path, pending_removal
from litrag.narrative.index import index_path

if TYPE_CHECKING:
    from llama_index.core.vector_stores.types import BasePydanticVectorStore

    from litrag.ingestion.library import Library
    from litrag.stores.edge_store import QdrantEdgeVectorStore


# ------------------------------------------------------------------------------- files only
def check_files(
    home: Path, collection: str, records: Iterable[BookRecord], embedded: bool
) -> list[Problem]:
    """What can be told from the files alone, without opening (or locking) the store."""
    from litrag.stores.edge_schema import config_mismatch, read_config, shard_config_path

    home = Path(home)
    records = list(records)
    books = [r for r in records if r.status == "complete"]
    unfinished = unfinished_removal(home) or unfinished_reembed(home)
    if unfinished is not None:  # before the counts: its points are partly gone, by design
        return [unfinished]
    if not embedded:
        return []
    folder = home / "index" / collection
    shard_cfg = shard_config_path(folder)
    if not (home / "books.json").exists():
        if shard_cfg.exists():
            return [
                Problem(
                    f"{home / 'books.json'} is missing but the store {folder} holds data",
                    f"{REPAIR} (rebuilds the registry from the store)",
                    "unregistered",
                )
            ]
        return []
    if not records:
        return _registry_emptied(home)
    if not books:
        return []
    n = len(books)
    if not shard_cfg.exists():
        return [
            Problem(
                f"the store {folder / 'shard'} is missing, but the registry lists {n} "
                f"book{'s' * (n > 1)}",
                f"{REPAIR} (re-ingests them from their sources)",
                "store-missing",
            )
        ]
    try:
        saved = read_config(folder)
    except ValueError:
        saved = None
        damaged = True
    else:
        damaged = False
    if saved is None:
        state = "damaged" if damaged else "missing"
        return [
            Problem(
                f"the store config {folder / 'litrag_store.json'} is {state}",
                f"{REPAIR} (rebuilds it from the shard)",
                "store-config",
            )
        ]
    wrong = config_mismatch(folder, saved)
    if wrong:
        return [
            Problem(f"{folder}: {wrong}", f"{REPAIR} (rebuilds it from the shard)", "store-config")
        ]
    return []


def unfinished_removal(home: Path) -> Problem | None:
    """A ``litrag remove`` that was killed midway (its journal is still there): named, so
    that the repair finishes it rather than ingest the half-removed book again."""
    book_id = pending_removal(home)
    if book_id is None:
        return None
    return Problem(
        f"the removal of {book_id} was interrupted (its journal {journal_path(home)} is left)",
        f"{REPAIR} (finishes it) or `litrag remove {book_id}`",
        "removing",
        book_id,
    )


def unfinished_reembed(home: Path) -> Problem | None:
    """A ``litrag reembed`` killed midway (its journal is still there): its collections were
    dropped and are partly filled again, so a search found a book's blocks but few or none of
    its children and said "Nothing in the book matches" (issue 50, bug 1). Nothing answers
    from the library until the reembed is finished from its journal."""
    from litrag.ingestion.reembed import journal_command, journal_path

    command = journal_command(home)
    if command is None:
        return None
    return Problem(
        f"a reembed of this library was interrupted (its journal {journal_path(home)} is left; "
        "the store is half embedded)",
        f"run `{command}` again (it resumes from the journal)",
        "reembedding",
    )


def _registry_emptied(home: Path) -> list[Problem]:
    """A registry that lists no book while the docstore still holds chapters of some: the
    registry lost its rows (``{}``), it is not an empty library. The docstore is the evidence
    a file can give (removing a book removes its chapters there too)."""
    path = home / "docstore.json"
    if not path.is_file():
        return []
    try:
        data = read_json(path, "docstore-file", REPAIR)
    except LibraryDamagedError:
        return []  # named by the docstore's own check
    hashes = data.get("docstore/metadata", {}) if isinstance(data, dict) else {}
    books = sorted({str(d).split(":", 1)[0] for d in hashes if ":" in str(d)})
    if not books:
        return []
    shown = ", ".join(books[:3]) + (", ..." if len(books) > 3 else "")
    return [
        Problem(
            f"{home / 'books.json'} is damaged: it lists no books, but the library holds "
            f"{len(books)} ({shown})",
            f"{REPAIR} (rebuilds the registry from the store)",
            "unregistered",
        )
    ]


# ------------------------------------------------------------------------------- the store
def zero_vectors(vectors: dict[str, Any] | None, names: Sequence[str]) -> list[str]:
    """The names among ``names`` whose vector (or every vector of a multivector) is all zeros,
    holds a NaN or infinity, or is absent: a point a search can never find by meaning (dense)
    or by its words (a sparse BM25 vector, zeroed: ``verify`` said ok and answers changed)."""
    bad = []
    vectors = vectors or {}
    for name in names:
        v = vectors.get(name)
        if v is None:
            bad.append(name)
            continue
        if hasattr(v, "indices") and hasattr(v, "values"):  # a sparse vector
            rows = [list(v.values)]
        else:
            rows = v if v and isinstance(v[0], (list, tuple)) else [v]
        if any(not math.isfinite(x) for row in rows for x in row) or all(
            math.fsum(x * x for x in row) < 1e-12 for row in rows
        ):
            bad.append(name)
    return bad


def check_store(
    store: BasePydanticVectorStore,
    records: Iterable[BookRecord],
    book_ids: Sequence[str] | None = None,
) -> list[Problem]:
    """Counts per book against the registry, one sampled point per book, unregistered points.

    ``book_ids``: check only these books (what ``ask`` is about to search); None: every book, and
    that the store holds no points of books the registry does not list.
    """
    rows = {r.book_id: r for r in records}
    chosen = (
        [rows[b] for b in book_ids if b in rows] if book_ids is not None else list(rows.values())
    )
    problems: list[Problem] = []
    for rec in chosen:
        if rec.status != "complete":
            continue
        have = count_points(store, rec.book_id)
        if have != rec.nodes:
            problems.append(
                Problem(
                    f"{rec.book_id} ({rec.title}): the registry lists {rec.nodes} blocks but the "
                    f"store holds {have}",
                    f"{REPAIR} (re-ingests it from {rec.source or 'its source'})",
                    "points",
                    rec.book_id,
                )
            )
            continue
        bad = sample_vectors(store, rec.book_id)
        if bad:
            problems.append(
                Problem(
                    f"{rec.book_id} ({rec.title}): its stored {', '.join(bad)} vectors are zero",
                    f"{REPAIR} (embeds it again)",
                    "vectors",
                    rec.book_id,
                )
            )
    if book_ids is None:
        listed = sum(r.nodes for r in rows.values() if r.status == "complete")
        partial = [r.book_id for r in rows.values() if r.status != "complete"]
        total = count_points(store)
        if total > listed and not partial:
            problems.append(
                Problem(
                    f"the store holds {total - listed} points of books the registry does not list",
                    f"{REPAIR} (restores them to the registry)",
                    "unregistered",
                )
            )
    return problems


def check_children(
    store: BasePydanticVectorStore, records: Iterable[BookRecord], book_ids: Sequence[str]
) -> list[Problem]:
    """The paragraph children of ``book_ids`` in their own store, counted against the registry
    (a count on the payload index: milliseconds). Retrieval ranks blocks through them, so a
    book whose children are missing or partial answered "Nothing matches" with exit 0."""
    rows = {r.book_id: r for r in records}
    problems = []
    for book_id in book_ids:
        rec = rows.get(book_id)
        if rec is None or rec.status != "complete" or not rec.children:
            continue
        have = count_points(store, book_id)
        if have != rec.children:
            problems.append(
                Problem(
                    f"{book_id} ({rec.title}): the registry lists {rec.children} paragraph "
                    f"children but the store holds {have}",
                    f"{REPAIR} (re-ingests it from {rec.source or 'its source'})",
                    "points",
                    book_id,
                )
            )
    return problems


def vector_names(store: BasePydanticVectorStore) -> list[str]:
    cfg = getattr(store, "config", None)
    if cfg is None:
        return []
    names = (
        cfg.dense_vector_name,
        cfg.window_vector_name,
        getattr(cfg, "sparse_vector_name", None),
    )
    return [n for n in names if n]


def sample_vectors(store: BasePydanticVectorStore, book_id: str) -> list[str]:
    """Zero or missing vectors among the first stored points of ``book_id`` (embedded store)."""
    names = vector_names(store)
    if not names or getattr(store, "client", None) is None:
        return []
    bad: set[str] = set()
    for point in store.scan_points(book_id=book_id, limit=4, vectors=names):
        bad.update(zero_vectors(point.vectors, names))
    return sorted(bad)


def scan_store(store: QdrantEdgeVectorStore) -> tuple[dict[str | None, BookScan], int]:
    """Every point, book by book, with its vectors checked; and the number of points seen."""
    names = vector_names(store)
    out: dict[str | None, BookScan] = {}
    n = 0
    for point in store.scan_points(vectors=names):
        n += 1
        p = point.payload
        scan = out.setdefault(p.get("book_id"), BookScan())
        scan.points += 1
        scan.zero.update(zero_vectors(point.vectors, names))
        if p.get("doc_id"):
            scan.doc_ids.add(str(p["doc_id"]))
        if isinstance(p.get("chapter_index"), int):
            scan.chapters.add(p["chapter_index"])
        if p.get("_node_id"):
            scan.node_ids.add(str(p["_node_id"]))
        if not scan.meta:
            scan.meta = {k: p.get(k) for k in ("title", "author", "segmenter")}
    return out, n


# ------------------------------------------------------------------------------- verify
def check_library_files(
    home: Path, collection: str, repair: bool
) -> tuple[list[Problem], list[str]]:
    """The files a library opens with: the registry, the docstore, the ingestion cache and the
    store config. Returns (problems left, repairs done). A damaged file is set aside (kept),
    never deleted; the store config is re-derived from the shard's own config."""
    from litrag.stores.edge_schema import config_from_shard, write_config

    home = Path(home)
    problems: list[Problem] = []
    done: list[str] = []
    reembed = unfinished_reembed(home)
    if reembed is not None:  # a repair would re-ingest with the old embedder: finish it first
        return [reembed], done
    for path, kind, why in (
        (home / "books.json", "registry-file", "rebuilds it from the store"),
        (home / "docstore.json", "docstore-file", "sets it aside; the store keeps every block"),
        (home / "cache" / "ingestion.json", "cache-file", "sets it aside; ingest segments again"),
    ):
        if not path.exists():
            continue
        try:
            if kind == "registry-file":  # its shape too: `null` or `[]` parse, yet are no registry
                read_rows(path)
            else:
                read_json(path, kind, f"{REPAIR} ({why})")
        except LibraryDamagedError as exc:
            if repair:
                dest = set_aside(path)
                done.append(f"set the damaged {path.name} aside as {dest.name}")
            else:
                problems.extend(exc.problems)
    folder = home / "index" / collection
    records: list[BookRecord] = []
    if (home / "books.json").exists() and not any(p.kind == "registry-file" for p in problems):
        records = read_registry(home)
    found = [p for p in check_files(home, collection, records, True) if p.kind == "store-config"]
    if found and repair:
        try:
            cfg = config_from_shard(folder)
        except ValueError as exc:
            problems.append(Problem(found[0].what, f"cannot rebuild it: {exc}", "store-config"))
        else:
            write_config(folder, cfg)
            done.append(
                f"rebuilt {folder / 'litrag_store.json'} from the shard "
                f"(window vectors: {cfg.window_vector_name or 'none'})"
            )
    else:
        problems.extend(found)
    if not found:
        problems.extend(_check_shard(folder, repair, done))
    kids = home / "index" / f"{collection}-children"  # the paragraph children's own shard
    if kids.is_dir():
        problems.extend(_check_shard(kids, repair, done))
    return problems, done


def _check_shard(folder: Path, repair: bool, done: list[str]) -> list[Problem]:
    """The engine's own files: the shard loads. A damaged one is set aside (kept) by the
    repair; the books whose points went with it are then ingested again from their sources
    (``verify_library``), as after a deleted shard."""
    from litrag.stores.edge_open import probe_shard

    damage = probe_shard(folder)
    if damage is None:
        return []
    shard = folder / "shard"
    if repair:
        dest = set_aside(shard)
        done.append(f"set the damaged store {shard} aside as {dest.name}")
        return []
    return [
        Problem(
            f"the store {shard} is damaged ({damage})",
            f"{REPAIR} (sets it aside and ingests the books again from their sources)",
            "store-damaged",
        )
    ]


def _damaged_character_index(home: Path, book_id: str) -> str | None:
    """Why the book's character index does not read back, or None (absent or sound)."""
    from litrag.narrative.index import load_index
    from litrag.narrative.jsonfile import DamagedFileError

    try:
        load_index(home, book_id)
    except DamagedFileError as exc:
        return str(exc).split(": run `litrag verify", 1)[0]
    return None


def verify_library(
    library: Library, repair: bool, say: Callable[[str], None] = lambda _m: None
) -> tuple[list[Problem], list[str]]:
    """The full check of an opened library (embedded store): every point read, book by book,
    against the registry and the docstore; with ``repair``, what can be re-derived is: a book
    whose points are missing, zero or half-ingested is ingested again from its source (or, with
    the source gone but every point there, embedded again from its stored text); points of no
    registered chapter are dropped; books the registry lost are restored from their points.
    What cannot be re-derived is left, and said. Returns (problems left, repairs done)."""
    store = library.store
    problems: list[Problem] = []
    done: list[str] = []
    unfinished = unfinished_removal(library.home)
    if unfinished is not None and not repair:
        problems.append(unfinished)
    elif unfinished is not None:  # finished, not undone: the book is not ingested again
        assert unfinished.book_id is not None
        say(f"{unfinished.book_id}: finishing its interrupted removal")
        library.remove(unfinished.book_id)
        done.append(f"{unfinished.book_id}: finished its interrupted removal")
    records = {r.book_id: r for r in library.books()}
    if unfinished is not None and not repair:  # its rows and points are the removal's
        records.pop(unfinished.book_id or "", None)
    scans, _ = scan_store(store)
    if unfinished is not None and not repair:
        scans.pop(unfinished.book_id, None)
    touched = False
    for book_id, rec in records.items():
        scan = scans.get(book_id, BookScan())
        label = f"{book_id} ({rec.title})"
        if rec.status != "complete":
            p = Problem(
                f"{label} was interrupted while ingesting",
                f"rerun `litrag ingest {rec.source}` or {REPAIR}",
                "interrupted",
                book_id,
            )
        elif scan.points != rec.nodes:
            p = Problem(
                f"{label}: the registry lists {rec.nodes} blocks but the store holds {scan.points}",
                f"{REPAIR} (re-ingests it from {rec.source or 'its source'})",
                "points",
                book_id,
            )
        elif rec.children and (kids := _children_of(library, book_id)) != rec.children:
            p = Problem(
                f"{label}: the registry lists {rec.children} paragraph children but the store "
                f"holds {kids}",
                f"{REPAIR} (re-ingests it from {rec.source or 'its source'})",
                "points",
                book_id,
            )
        elif scan.zero:
            p = Problem(
                f"{label}: {', '.join(sorted(scan.zero))} vectors of some blocks are zero",
                f"{REPAIR} (embeds it again)",
                "vectors",
                book_id,
            )
        elif rec.chapters and not library.chapter_doc_ids(book_id):
            # docstore.json deleted or emptied: the blocks answer, but the chat's chapter list
            # (read from the docstore) is empty and a later ingest cannot tell what it holds
            p = Problem(
                f"{label}: the docstore {library.home / 'docstore.json'} holds none of its "
                f"{rec.chapters} chapters",
                f"{REPAIR} (re-ingests it from {rec.source or 'its source'})",
                "docstore",
                book_id,
            )
        else:
            chapters = library.chapter_doc_ids(book_id)
            stray = sorted(d for d in scan.doc_ids if chapters and d not in chapters)
            if stray:
                p = Problem(
                    f"{label}: the store holds points of {len(stray)} stray chapters ({stray[0]})",
                    f"{REPAIR} (drops them)",
                    "orphans",
                    book_id,
                )
                if repair:
                    for doc_id in stray:
                        store.delete(doc_id)
                    done.append(f"{book_id}: dropped the points of {len(stray)} stray chapter(s)")
                    touched = True
                else:
                    problems.append(p)
                continue
            damaged = _damaged_character_index(library.home, book_id)
            if damaged is None:
                continue
            p = Problem(
                f"{label}: {damaged}",
                f"{REPAIR} (rebuilds it: re-ingests the book from {rec.source or 'its source'})",
                "characters",
                book_id,
            )
            if repair:
                dest = set_aside(index_path(library.home, book_id))
                done.append(f"{book_id}: set the damaged character index aside as {dest.name}")
        if not repair:
            problems.append(p)
            continue
        say(f"{book_id}: repairing ({p.what.split(': ', 1)[-1]})")
        why = library.reingest(book_id, say)
        if why is None:
            done.append(f"{book_id}: ingested again from {rec.source}")
            touched = True
        elif p.kind == "characters":  # asking works without it; ingest rebuilds it
            problems.append(
                Problem(
                    f"{label}: its character index could not be rebuilt",
                    f"{why}; ingest the book again with `litrag ingest FILE`",
                    p.kind,
                    book_id,
                )
            )
        elif p.kind == "vectors":
            n = library.reembed(book_id)
            done.append(f"{book_id}: embedded its {n} stored blocks again ({why})")
            touched = True
        else:
            problems.append(
                Problem(
                    p.what,
                    f"cannot re-derive it: {why}; ingest the book again with `litrag ingest FILE`",
                    p.kind,
                    book_id,
                )
            )
    for book_id, scan in scans.items():
        if book_id in records:
            continue
        if book_id is None:
            p = Problem(
                f"the store holds {scan.points} points of no book",
                f"{REPAIR} (drops them)",
                "orphans",
            )
            if repair:
                store.delete_nodes(node_ids=sorted(scan.node_ids))
                done.append(f"dropped {scan.points} points of no book")
                touched = True
            else:
                problems.append(p)
            continue
        p = Problem(
            f"{book_id}: the store holds {scan.points} points of a book the registry does not list",
            f"{REPAIR} (restores it to the registry)",
            "unregistered",
            book_id,
        )
        if repair:
            library.restore_record(book_id, scan)
            done.append(f"{book_id}: restored to the registry from its {scan.points} stored points")
        else:
            problems.append(p)
    flagged = {p.book_id for p in problems}
    for book_id, rec in records.items():  # what a later repair would re-ingest from
        if book_id not in flagged and (p := source_problem(rec)) is not None:
            problems.append(p)
    if touched and hasattr(store, "optimize"):
        say("building the search index")
        store.optimize()
    return problems, done


def _children_of(library: Library, book_id: str) -> int | None:
    """The book's points in the children's collection (None: the library has none)."""
    store = getattr(library, "children_store", None)
    return None if store is None else count_points(store, book_id)


def source_problem(rec: BookRecord) -> Problem | None:
    """A book whose source file is gone, or is no longer the file it was ingested from (issue
    34: two uploads named alike left one book's row pointing at the other's text, and a refused
    upload deleted it, while verify said ok). Its blocks still answer, but a repair would have
    nothing, or the wrong text, to ingest again: nothing here re-derives it, the line says how."""
    if not rec.source or rec.status != "complete":  # restored rows: the source is unknown
        return None
    label, src = f"{rec.book_id} ({rec.title})", Path(rec.source)
    if not src.is_file():
        return Problem(
            f"{label}: its source {rec.source} is missing",
            "its blocks still answer, but a repair cannot ingest it again: put the file back, "
            "or run `litrag ingest FILE` on a copy of the book",
            "source",
            rec.book_id,
        )
    if rec.source_digest and file_digest(src) != rec.source_digest:
        return Problem(
            f"{label}: its source {rec.source} changed since it was ingested",
            f"run `litrag ingest {rec.source}` to take the new text, or put the old file back",
            "source",
            rec.book_id,
        )
    return None
