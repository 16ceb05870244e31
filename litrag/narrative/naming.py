"""What a small model reads of a passage about a character: the sentences that name them.

A question on who someone is, or on two people together, is steered to the blocks where the
character index finds them (introduced, named most, then the question's retrieval). A whole
block is ~270 words, so the packaged model's reading budget (``LITRAG_READ_WORDS``) holds two of
them: both from the character's first appearance, so "Who is Spitz?" was answered from the
chapter that introduces him, never the ones where he leads the team and fights Buck. Cut each
block to the sentences that name the character, each with the sentence after it (what they do
or what is said of them), and the same budget reads five or six blocks across the book. Only
the prompt reads the excerpt: the block stays the source that is cited.
"""

from __future__ import annotations

import re

from litrag.narrative.router import fold
from litrag.segment.sentences import split_sentences

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
    text order, "[...]" where sentences were left out, while they hold ``max_words`` (the first
    always); None when no sentence names them (the caller keeps the block whole)."""
    sentences = split_sentences(text)
    hits = [i for i, s in enumerate(sentences) if named.search(fold(s.text))]
    if not hits:
        return None
    keep: set[int] = set()
    words = 0
    for i in hits:
        add = [j for j in range(i, min(i + follow + 1, len(sentences))) if j not in keep]
        cost = sum(sentences[j].words for j in add)
        if keep and words + cost > max_words:
            break
        keep.update(add)
        words += cost
    if len(keep) == len(sentences):
        return text
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
