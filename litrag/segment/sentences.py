"""Sentence indexing: 1-based sentences with the exact character span of each in its source.

Every block the parser emits is a run of these sentences, so every block can point back into the
book. Punkt comes from the copy bundled inside llama-index-core: nothing is downloaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_BLANK_RUN = re.compile(r"\n[ \t\f\v]*\n\s*")
# A paragraph that is only a scene-break ornament: "* * *", "***", "-----", "~ ~ ~", "#".
_SCENE_BREAK = re.compile(r"^\s*(?:[*#~=_\-·•]\s*){1,}$")


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence (or a piece of an over-long one) of a unit."""

    index: int  # 1-based within the unit
    start: int  # char offset in the unit text, inclusive
    end: int  # char offset in the unit text, exclusive
    text: str  # exactly source[start:end]
    paragraph: int  # 0-based paragraph number within the unit
    paragraph_start: bool  # first sentence of its paragraph
    scene_break: bool  # a scene-break ornament or a long blank run precedes it

    @property
    def words(self) -> int:
        return len(self.text.split())

    @property
    def flat(self) -> str:
        """The sentence on one line, for prompts and displays."""
        return " ".join(self.text.split())


@lru_cache(maxsize=1)
def _punkt():
    import llama_index.core
    import nltk

    cache = Path(llama_index.core.__file__).parent / "_static" / "nltk_cache"
    if str(cache) not in nltk.data.path:
        nltk.data.path.append(str(cache))
    from nltk.tokenize import PunktTokenizer

    return PunktTokenizer("english")


def _paragraph_spans(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, long_gap_before) of each non-blank paragraph, trimmed of outer whitespace."""
    spans: list[tuple[int, int, bool]] = []
    pos = 0
    gap_before = False
    for match in _BLANK_RUN.finditer(text):
        spans.append((pos, match.start(), gap_before))
        gap_before = match.group(0).count("\n") >= 4  # three or more blank lines
        pos = match.end()
    spans.append((pos, len(text), gap_before))
    out = []
    for start, end, gap in spans:
        chunk = text[start:end]
        stripped = chunk.strip()
        if not stripped:
            continue
        lead = len(chunk) - len(chunk.lstrip())
        out.append((start + lead, start + lead + len(stripped), gap))
    return out


def _split_long(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int]]:
    """Cut an over-long sentence at clause punctuation, else at whitespace, under max_words."""
    piece = text[start:end]
    if len(piece.split()) <= max_words:
        return [(start, end)]
    # candidate cut points: after clause punctuation first, any whitespace as a last resort
    words = list(re.finditer(r"\S+", piece))
    cuts: list[tuple[int, int]] = []
    first = 0
    while len(words) - first > max_words:
        window = words[first : first + max_words]
        cut_at = None
        for k in range(len(window) - 1, max(len(window) // 2, 1) - 1, -1):
            if window[k].group(0)[-1] in ";:,\u2014" or window[k].group(0).endswith("--"):
                cut_at = k
                break
        if cut_at is None:
            cut_at = len(window) - 1
        last = first + cut_at
        cuts.append((start + words[first].start(), start + words[last].end()))
        first = last + 1
    cuts.append((start + words[first].start(), start + words[-1].end()))
    return cuts


def _merge_attributions(body: str, spans) -> list[tuple[int, int]]:
    """Rejoin what Punkt cuts after a quoted question or exclamation: ``“Who?” asked he.``"""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        head = body[start : start + 1]
        if out and head.islower() and body[out[-1][1] - 1] in "\"'\u201d\u2019":
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def split_sentences(text: str, max_sentence_words: int = 120) -> list[Sentence]:
    """Split a unit into sentences with exact spans.

    Paragraphs (blank-line separated) are tokenised one by one, so a heading or a line of dialogue
    never merges with the next paragraph. Scene-break ornaments are not sentences: they mark the
    sentence after them. Sentences over ``max_sentence_words`` are cut at clause punctuation so a
    single sentence can always fit a block size cap.
    """
    tokenizer = _punkt()
    sentences: list[Sentence] = []
    pending_break = False
    paragraph = -1
    for p_start, p_end, long_gap in _paragraph_spans(text):
        body = text[p_start:p_end]
        if _SCENE_BREAK.match(body):
            pending_break = True
            continue
        paragraph += 1
        brk = pending_break or long_gap
        pending_break = False
        first = True
        for s_start, s_end in _merge_attributions(body, tokenizer.span_tokenize(body)):
            for a, b in _split_long(text, p_start + s_start, p_start + s_end, max_sentence_words):
                sentences.append(
                    Sentence(
                        index=len(sentences) + 1,
                        start=a,
                        end=b,
                        text=text[a:b],
                        paragraph=paragraph,
                        paragraph_start=first,
                        scene_break=brk and first,
                    )
                )
                first = False
    return sentences


def sentence_windows(text: str, size: int = 3, stride: int = 2) -> list[str]:
    """Windows of ``size`` consecutive sentences every ``stride``; the last one always ends the
    text. What dense MaxSim embeds and what windowed BM25 scores, so both see the same windows."""
    sents = [s.flat for s in split_sentences(text)] or [text.strip() or " "]
    starts = list(range(0, max(1, len(sents) - size + 1), stride))
    if starts[-1] + size < len(sents):
        starts.append(len(sents) - size)
    return [" ".join(sents[a : a + size]) for a in starts]
