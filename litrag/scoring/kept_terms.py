"""A point's sentences' BM25 term ids as the store keeps them, and what a query counts in them.

BM25 over sentence windows (``window_bm25``) re-scores a pool of candidates per query
(``DEFAULT_POOL``). Cutting their sentences again took ~90% of a query (Punkt); reading the
kept ids back as nested lists ~2 ms more (the payload hands one Python object per id); a
``Counter`` per window ~2 ms more. So a point keeps one string (``pack_terms``), a query
decodes its pool's strings in one call and counts its own terms in every window at once
(``window_counts``): the same integers a ``Counter`` gives, so the same scores
(``tests/test_stored_sentence_terms.py``).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np

WINDOW_SENTENCES = 3  # as the dense windows (embeddings.SentenceWindowEncoder)
WINDOW_STRIDE = 2
_HEAD = 2  # a packed text opens with its sentence count and its id count
_GROUP = 3  # u32s padded to a multiple of 3 (12 bytes, 16 base64 characters: no '=')

# A text's kept ids: ``pack_terms``'s string, or the nested lists a library written before it
# keeps (``window_bm25.sentence_terms``).
Kept = str | Sequence[Sequence[int]]


def pack_terms(terms: Sequence[Sequence[int]]) -> str:
    """Each sentence's term ids as one string: base64 of little-endian u32s (sentence count, id
    count, each sentence's length, the ids in order, zeros to a multiple of 3 u32s, so that the
    strings of a pool joined together decode in one call)."""
    flat = [len(terms), sum(len(s) for s in terms), *(len(s) for s in terms)]
    flat += [t for s in terms for t in s]
    flat += [0] * (-len(flat) % _GROUP)
    return base64.b64encode(np.asarray(flat, dtype="<u4").tobytes()).decode("ascii")


def unpack_terms(packed: str) -> list[list[int]]:
    """``pack_terms``'s lists back (``ValueError`` when the string is not its form)."""
    ((lengths, ids),) = kept_arrays([packed])
    flat, out, at = ids.tolist(), [], 0
    for n in lengths.tolist():
        out.append(flat[at : at + n])
        at += n
    return out


def kept_arrays(kept: Sequence[Kept]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(sentence lengths, all ids in order) of each text; the packed ones decoded together."""
    packed = [k for k in kept if isinstance(k, str)]
    if any(len(k) % 16 for k in packed):
        raise ValueError("kept sentence terms are not pack_terms' form")
    words = np.frombuffer(base64.b64decode("".join(packed)), dtype="<u4") if packed else None
    out, at = [], 0
    for k in kept:
        if not isinstance(k, str):
            out.append(
                (
                    np.asarray([len(s) for s in k], dtype=np.uint32),
                    np.asarray([t for s in k for t in s], dtype=np.uint32),
                )
            )
            continue
        assert words is not None
        size = len(k) * 3 // 16  # u32s this string holds
        n, m = (int(x) for x in words[at : at + _HEAD]) if size >= _HEAD else (-1, -1)
        lengths = words[at + _HEAD : at + _HEAD + n]
        if n < 0 or -(-(_HEAD + n + m) // _GROUP) * _GROUP != size or int(lengths.sum()) != m:
            raise ValueError("kept sentence terms are not pack_terms' form")
        out.append((lengths, words[at + _HEAD + n : at + _HEAD + n + m]))
        at += size
    return out


def packed_arrays(packed: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each text's sentence count, all sentence lengths, all ids), in order, of ``pack_terms``
    strings: decoded and checked in whole-array steps, where ``kept_arrays`` walks the texts one
    by one (a pool of 100: ~0.1 ms against ~0.7 ms)."""
    if any(len(k) % 16 for k in packed):
        raise ValueError("kept sentence terms are not pack_terms' form")
    words = np.frombuffer(base64.b64decode("".join(packed)), dtype="<u4").astype(np.int64)
    sizes = np.fromiter((len(k) * 3 // 16 for k in packed), dtype=np.int64, count=len(packed))
    if (sizes < _HEAD).any():
        raise ValueError("kept sentence terms are not pack_terms' form")
    at = np.cumsum(sizes) - sizes  # where each text's u32s start
    n, m = words[at], words[at + 1]
    if (-(-(_HEAD + n + m) // _GROUP) * _GROUP != sizes).any():
        raise ValueError("kept sentence terms are not pack_terms' form")
    owner = np.repeat(np.arange(len(packed)), sizes)
    rel = np.arange(len(words)) - at[owner]  # each u32's place within its text
    first_id = _HEAD + n[owner]
    is_len = (rel >= _HEAD) & (rel < first_id)
    lengths = words[is_len]
    if (np.bincount(owner[is_len], weights=lengths, minlength=len(packed)) != m).any():
        raise ValueError("kept sentence terms are not pack_terms' form")
    ids = words[(rel >= first_id) & (rel < first_id + m[owner])]
    return n, lengths, ids


def window_starts(n: int) -> list[int]:
    """First sentence of each window of a text of ``n`` sentences: ``size`` sentences every
    ``stride``, the last one ending the text (as ``segment.sentences.sentence_windows``)."""
    starts = list(range(0, max(1, n - WINDOW_SENTENCES + 1), WINDOW_STRIDE))
    if starts[-1] + WINDOW_SENTENCES < n:
        starts.append(n - WINDOW_SENTENCES)
    return starts


def window_spans(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``window_starts`` of texts of ``counts`` sentences, laid end to end, in whole-array
    steps: each window's first sentence and the one after its last (in the joined sentences),
    and each text's window count."""
    counts = np.asarray(counts, dtype=np.int64)
    regular = -(-np.maximum(1, counts - WINDOW_SENTENCES + 1) // WINDOW_STRIDE)
    last = (regular - 1) * WINDOW_STRIDE
    extra = (last + WINDOW_SENTENCES < counts).astype(np.int64)  # one more, ending the text
    per = regular + extra
    text = np.repeat(np.arange(len(counts)), per)
    k = np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per)  # window within text
    n = counts[text]
    start = np.where(k < regular[text], k * WINDOW_STRIDE, n - WINDOW_SENTENCES)
    first = (np.cumsum(counts) - counts)[text]
    return first + start, first + np.minimum(start + WINDOW_SENTENCES, n), per


def window_counts(
    kept: Sequence[Kept], terms: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """How often each of ``terms`` occurs in each window of each text (windows x terms), each
    window's length (in terms), and how many windows each text has, in order."""
    if kept and all(isinstance(k, str) for k in kept):  # as every library writes them now
        counts, sentences, ids = packed_arrays(kept)  # type: ignore[arg-type]
    else:
        parts = kept_arrays(kept)
        counts = np.asarray([len(p[0]) for p in parts], dtype=np.int64)
        sentences = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint32)
        ids = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.uint32)
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)  # where each sentence starts
    np.cumsum(sentences, out=offsets[1:])
    begin, end, per = window_spans(counts)
    lo, hi = offsets[begin], offsets[end]
    per_text = per.tolist()
    seen = np.zeros((len(ids) + 1, len(terms)), dtype=np.int64)  # running count of each term
    if len(terms) and len(ids):
        wanted = np.asarray(terms, dtype=np.uint32)
        np.cumsum(ids[:, None] == wanted[None, :], axis=0, out=seen[1:])
    return seen[hi] - seen[lo], hi - lo, per_text
