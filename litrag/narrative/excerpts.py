"""What a small model reads of the blocks a narrative tool found, within its word budget.

The packaged model reads 650 words (``LITRAG_READ_WORDS``); a block is ~270. Whole, that is two
blocks, which serves a passage question (the best blocks first) but not a question whose answer
runs through many blocks. Two cuts, both of the book's own sentences, "[...]" where sentences
were left out; only the prompt reads them, the block stays the cited source:

- ``naming_excerpt``: about a character ("Who is Spitz?", two people together), the sentences
  that name them, each with the sentence after it (what they do, what is said of them). Whole
  blocks gave two from the character's first appearance, never the ones where Spitz leads the
  team and fights Buck; cut, the same budget reads five or six blocks across the book.
- ``gist_excerpt``: about a chapter with no LLM-built outline ("What happens in chapter 3?"),
  each block's sentence holding most of its salient terms (the offline segmenter's subtitle
  names them: the block's people and distinctive words) and the sentence after it, so the
  budget covers every chosen block of the chapter instead of the first few whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from litrag.narrative.router import fold
from litrag.scoring.bm25 import tokenize
from litrag.segment.sentences import Sentence, split_sentences

GAP = "[...]"
NAMING_WORDS = 120  # of a block, at most: five or six blocks within the local model's 650


def naming_pattern(names: list[str]) -> re.Pattern[str] | None:
    """A pattern for any of ``names`` (folded, as ``fold`` folds the text), whole words."""
    forms = [n for n in dict.fromkeys(fold(n).strip() for n in names) if n]
    if not forms:
        return None
    alts = "|".join(r"\s+".join(map(re.escape, f.split())) for f in sorted(forms, key=len)[::-1])
    return re.compile(rf"(?<![\w-])(?:{alts})(?![\w-])")


def naming_excerpt(
    text: str, named: re.Pattern[str], max_words: int = NAMING_WORDS, follow: int = 1
) -> str | None:
    """The sentences of ``text`` that ``named`` finds, each with the ``follow`` after it, in
    text order, while they hold ``max_words`` (the first always); None when the block is read
    whole (no sentence names them, or every one is kept)."""
    sentences = split_sentences(text)
    hits = [i for i, s in enumerate(sentences) if named.search(fold(s.text))]
    if not hits:
        return None
    return _cut(sentences, hits, max_words, follow)


def gist_excerpt(text: str, terms: Sequence[str], max_words: int, follow: int = 1) -> str | None:
    """The sentence of ``text`` holding most of ``terms`` (stemmed as BM25 stems them; the
    first on a tie, the first sentence when none holds any), with the ``follow`` after it while
    they hold ``max_words``; None when that is the whole block."""
    sentences = split_sentences(text)
    if not sentences:
        return None
    wanted = {t for term in terms for t in tokenize(term)}
    scores = [len(wanted.intersection(tokenize(s.text))) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
    return _cut(sentences, [best], max_words, follow)


def _cut(sentences: list[Sentence], picks: list[int], max_words: int, follow: int) -> str | None:
    """``picks`` (in order), each with its ``follow`` sentences, while they hold ``max_words``
    (the first always), joined in text order with ``GAP`` where sentences were left out; None
    when every sentence is kept."""
    keep: set[int] = set()
    words = 0
    for i in picks:
        add = [j for j in range(i, min(i + follow + 1, len(sentences))) if j not in keep]
        cost = sum(sentences[j].words for j in add)
        if keep and words + cost > max_words:
            break
        keep.update(add)
        words += cost
    if len(keep) == len(sentences):
        return None
    parts: list[str] = []
    last = -1
    for j in sorted(keep):
        if j != last + 1:
            parts.append(GAP)
        parts.append(" ".join(sentences[j].text.split()))
        last = j
    if last != len(sentences) - 1:
        parts.append(GAP)
    return " ".join(parts)
