"""Narrative assets: what a reader can ask about beyond one passage (first: the character index).

``index.CharacterIndexer`` builds a book's character index at ingest and puts each block's
characters in its payload; ``index.load_index`` reads it back. Nothing here imports spaCy until
an index is built (``litrag[narrative]``).
"""

from __future__ import annotations

from importlib.util import find_spec


def character_index_available() -> bool:
    """True when spaCy and the packaged English pipeline are installed (``litrag[narrative]``)."""
    from litrag.narrative.ner import MODEL

    return find_spec("spacy") is not None and find_spec(MODEL) is not None
