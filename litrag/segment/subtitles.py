"""Short extractive subtitles: the salient names and words of a block.

Used by the offline segmenter, and to fill a subtitle an LLM left empty. Salience is term
frequency in the block against document frequency over the unit's blocks, so a name that is in
every block of a chapter does not crowd out what is particular to this one.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z][A-Za-z'\u2019]*(?:-[A-Za-z]+)*")
_OPENERS = "\"'\u201c\u201d\u2018\u2019([-\u2014"
_HONORIFICS = {
    "mr",
    "mrs",
    "miss",
    "ms",
    "dr",
    "sir",
    "lady",
    "lord",
    "colonel",
    "captain",
    "mr.",
    "mrs.",
    "dr.",
    "st",
    "st.",
    "madame",
    "monsieur",
    "uncle",
    "aunt",
}


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    from litrag.segment.sentences import _punkt

    _punkt()  # puts llama-index's bundled NLTK data on the search path
    from nltk.corpus import stopwords as sw

    extra = {
        "said",
        "would",
        "could",
        "upon",
        "must",
        "shall",
        "might",
        "one",
        "yes",
        "well",
        "much",
        "little",
        "never",
        "nothing",
        "every",
        "though",
        "even",
        "however",
        "quite",
        "thing",
        "things",
        "think",
        "know",
        "come",
        "came",
        "go",
        "went",
        "see",
        "say",
        "made",
        "make",
        "like",
        "good",
        "great",
        "many",
        "may",
        "now",
        "oh",
        "ever",
        "indeed",
        "mr",
        "mrs",
        "miss",
        "sir",
        "dear",
        "soon",
        "away",
        "still",
        "without",
        "thought",
        "whether",
        "always",
        "another",
        "let",
        "us",
        "i'm",
        "don't",
        "it's",
    }
    return frozenset(sw.words("english")) | extra


def _opens_sentence(text: str, pos: int) -> bool:
    """Whether the word at ``pos`` opens a sentence (skipping quotes and brackets before it)."""
    k = pos - 1
    while k >= 0 and (text[k].isspace() or text[k] in _OPENERS):
        k -= 1
    return k < 0 or text[k] in ".!?:"


def _terms(text: str) -> tuple[list[str], list[str]]:
    """(names, words) of a text: capitalised words seen mid-sentence, and lowercase content."""
    stop = stopwords()
    text = text.replace("_", " ")
    tokens = [(m.group(0), _opens_sentence(text, m.start())) for m in _WORD.finditer(text)]
    mid_caps = {t for t, start in tokens if not start and t[0].isupper()}
    names: list[str] = []
    words: list[str] = []
    for tok, _start in tokens:
        low = tok.lower().replace("\u2019", "'")
        if low.endswith("'s"):
            tok, low = tok[:-2], low[:-2]
        if tok in mid_caps or f"{tok}'s" in mid_caps or f"{tok}\u2019s" in mid_caps:
            if low not in stop and low not in _HONORIFICS and len(tok) > 1:
                names.append(tok)
        elif tok.islower() and low not in stop and len(low) > 3:
            words.append(low)
    return names, words


def make_subtitles(texts: Sequence[str], max_names: int = 2, max_words: int = 3) -> list[str]:
    """One subtitle per text, e.g. ``"Emma, Harriet: portrait, likeness, drawing"``."""
    parsed = [_terms(t) for t in texts]
    df: Counter[str] = Counter()
    for names, words in parsed:
        df.update(set(names) | set(words))
    total = len(texts)

    def top(items: list[str], k: int) -> list[str]:
        tf = Counter(items)
        score = {t: c * math.log(1 + total / df[t]) for t, c in tf.items()}
        return sorted(score, key=lambda t: (-score[t], t))[:k]

    out = []
    for names, words in parsed:
        head = ", ".join(top(names, max_names))
        tail = ", ".join(top(words, max_words))
        out.append(f"{head}: {tail}" if head and tail else head or tail or "passage")
    return out
