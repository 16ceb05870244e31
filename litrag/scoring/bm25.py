"""BM25 sparse vectors with no vocabulary file, plus an in-memory index that scores like Qdrant.

Production stores ``doc_fn`` vectors (BM25 term-frequency saturation only) in Qdrant with
``Modifier.IDF``, and queries with ``query_fn`` (weight 1 per unique term): Qdrant's dot product
then is Lucene's BM25, ``sum idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| /
avglen))`` with ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``. ``BM25Index`` computes the same
sum in memory, for evaluation without a vector store and as the reference production must match.

Terms are Snowball (English) stems of lower-cased alphanumeric runs, English stop-words removed,
as in fastembed's ``Qdrant/bm25``. Term ids are a 31-bit CRC32 of the stem, so the same text maps
to the same ids in every process and no vocabulary has to be stored or shipped; a collision
(about one pair in a 30,000-stem book collection) only merges two rare terms.
"""

from __future__ import annotations

import math
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

DEFAULT_K1 = 1.2
DEFAULT_B = 0.75
# Average document length (in kept terms) assumed by doc_fn when it cannot see the collection:
# fastembed's default; a 300-word narrative block keeps roughly 130-150 terms.
DEFAULT_AVG_LEN = 256.0
MAX_TOKEN_CHARS = 40  # longer "words" are noise (URLs, rules of dashes)

SparseVectors = tuple[list[list[int]], list[list[float]]]

_NON_WORD = re.compile(r"[\W_]+")  # punctuation, quotes of every form, underscores, spaces
_TERM_MASK = 0x7FFFFFFF


@lru_cache(maxsize=1)
def _nlp() -> tuple[frozenset[str], object]:
    """NLTK's English stop-words and Snowball stemmer, from llama-index-core's bundled data."""
    from litrag.segment.sentences import _punkt

    _punkt()  # puts llama-index-core's nltk_cache on nltk.data.path
    from nltk.corpus import stopwords
    from nltk.stem.snowball import SnowballStemmer

    return frozenset(stopwords.words("english")), SnowballStemmer("english")


def stop_words() -> frozenset[str]:
    """NLTK's English stop-words, as BM25 leaves them out."""
    return _nlp()[0]


@lru_cache(maxsize=262_144)
def _stem(word: str) -> str:
    return _nlp()[1].stem(word)  # type: ignore[attr-defined]


def tokenize(text: str) -> list[str]:
    """The BM25 terms of ``text`` in order: stems of non-stop-words, repeats kept."""
    stop = _nlp()[0]
    text = unicodedata.normalize("NFKC", text).lower()
    return [
        _stem(w)
        for w in _NON_WORD.sub(" ", text).split()
        if w not in stop and len(w) <= MAX_TOKEN_CHARS
    ]


def term_id(term: str) -> int:
    """Stable 31-bit id of a term (fits Qdrant's u32 sparse indices and signed int32 readers)."""
    return zlib.crc32(term.encode("utf-8")) & _TERM_MASK


def _term_counts(text: str) -> tuple[Counter[int], int]:
    """Term-id frequencies (colliding stems add up) and the document length in terms."""
    terms = tokenize(text)
    return Counter(term_id(t) for t in terms), len(terms)


def saturation(tf: float, length: float, avg_len: float, k1: float, b: float) -> float:
    """BM25's term-frequency part: grows with tf, saturates at k1 + 1, favours short documents."""
    return tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * length / avg_len))


def idf(n_docs: int, df: int) -> float:
    """Lucene's (and Qdrant's IDF modifier's) non-negative BM25 idf."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


class BM25Encoder:
    """Sparse document and query vectors; pass ``doc_fn`` / ``query_fn`` to a Qdrant store.

    ``avg_len`` should be the collection's mean document length in terms when known (see
    ``BM25Index.fit_avg_len``); Qdrant cannot apply length normalisation itself.
    """

    def __init__(
        self, k1: float = DEFAULT_K1, b: float = DEFAULT_B, avg_len: float = DEFAULT_AVG_LEN
    ) -> None:
        if avg_len <= 0:
            raise ValueError("avg_len must be positive")
        self.k1, self.b, self.avg_len = k1, b, avg_len

    def __repr__(self) -> str:
        return f"BM25Encoder(k1={self.k1}, b={self.b}, avg_len={self.avg_len:g})"

    def doc_vector(self, text: str) -> tuple[list[int], list[float]]:
        counts, length = _term_counts(text)
        ids = sorted(counts)
        return ids, [saturation(counts[i], length, self.avg_len, self.k1, self.b) for i in ids]

    def query_vector(self, text: str) -> tuple[list[int], list[float]]:
        ids = sorted({term_id(t) for t in tokenize(text)})
        return ids, [1.0] * len(ids)

    def doc_fn(self, texts: Sequence[str]) -> SparseVectors:
        """LlamaIndex ``sparse_doc_fn``: (indices, values) per text."""
        vecs = [self.doc_vector(t) for t in texts]
        return [v[0] for v in vecs], [v[1] for v in vecs]

    def query_fn(self, texts: Sequence[str]) -> SparseVectors:
        """LlamaIndex ``sparse_query_fn``: weight 1 per unique term; Qdrant multiplies in idf."""
        vecs = [self.query_vector(t) for t in texts]
        return [v[0] for v in vecs], [v[1] for v in vecs]


_DEFAULT = BM25Encoder()


def doc_fn(texts: Sequence[str]) -> SparseVectors:
    """``BM25Encoder().doc_fn`` with the default parameters."""
    return _DEFAULT.doc_fn(texts)


def query_fn(texts: Sequence[str]) -> SparseVectors:
    """``BM25Encoder().query_fn``."""
    return _DEFAULT.query_fn(texts)


class BM25Index:
    """Exhaustive in-memory BM25 over a fixed list of texts (one book's chunks, say).

    Scores equal what Qdrant returns for ``encoder.doc_fn`` vectors under ``Modifier.IDF`` and
    ``query_fn`` queries. With ``avg_len=None`` the mean length of ``texts`` is used, as in
    textbook BM25. Postings are plain dicts: a book's few thousand chunks score in milliseconds.
    """

    def __init__(
        self,
        texts: Iterable[str],
        *,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        avg_len: float | None = None,
    ) -> None:
        counted = [_term_counts(t) for t in texts]
        self.n_docs = len(counted)
        if avg_len is None:
            avg_len = self.fit_avg_len(length for _, length in counted)
        self.encoder = BM25Encoder(k1=k1, b=b, avg_len=avg_len)
        self._postings: dict[int, list[tuple[int, float]]] = {}
        for doc, (counts, length) in enumerate(counted):
            for tid, tf in counts.items():
                weight = saturation(tf, length, avg_len, k1, b)
                self._postings.setdefault(tid, []).append((doc, weight))
        self._idf = {t: idf(self.n_docs, len(p)) for t, p in self._postings.items()}

    @staticmethod
    def fit_avg_len(lengths: Iterable[int]) -> float:
        """Mean document length in terms (1.0 for an empty or term-less collection)."""
        lengths = list(lengths)
        mean = sum(lengths) / len(lengths) if lengths else 0.0
        return mean if mean > 0 else 1.0

    def __len__(self) -> int:
        return self.n_docs

    def scores(self, query: str) -> list[float]:
        """BM25 score of every document for ``query``, in document order."""
        out = [0.0] * self.n_docs
        for tid in self.encoder.query_vector(query)[0]:
            w = self._idf.get(tid)
            if w is None:
                continue
            for doc, sat in self._postings[tid]:
                out[doc] += w * sat
        return out

    def search(self, query: str, top_k: int | None = None) -> list[tuple[int, float]]:
        """(document index, score), best first; equal scores keep document order (deterministic)."""
        s = self.scores(query)
        order = sorted(range(self.n_docs), key=lambda i: (-s[i], i))
        return [(i, s[i]) for i in order[:top_k]]
