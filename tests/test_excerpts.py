"""The sentences naming a character, as the packaged model reads a steered block (real book)."""

from __future__ import annotations

import re
from pathlib import Path

from litrag.narrative.excerpts import GAP, gist_excerpt, naming_excerpt, naming_pattern
from litrag.segment.sentences import split_sentences

BOOK = Path(__file__).resolve().parents[1] / "litrag" / "data" / "pg215_call_of_the_wild.txt"


def _chapter_2() -> str:
    text = BOOK.read_text(encoding="utf-8")
    start = text.index("Chapter II.")
    return text[start : text.index("Chapter III.", start)]


def test_a_block_is_cut_to_the_sentences_naming_him_and_the_one_after_each():
    text = _chapter_2()[:6000]
    named = naming_pattern(["Spitz"])
    assert named is not None
    cut = naming_excerpt(text, named, max_words=10_000)
    assert cut is not None and cut != text
    sentences = [" ".join(s.text.split()) for s in split_sentences(text)]
    naming = [i for i, s in enumerate(sentences) if re.search(r"\bSpitz\b", s)]
    wanted = sorted({j for i in naming for j in (i, i + 1) if j < len(sentences)})
    expected: list[str] = []
    for k, j in enumerate(wanted):
        if j != (wanted[k - 1] + 1 if k else 0):
            expected.append(GAP)  # sentences left out before this one
        expected.append(sentences[j])
    if wanted[-1] != len(sentences) - 1:
        expected.append(GAP)
    assert cut == " ".join(expected)  # every naming sentence and its follower, in text order


def test_the_budget_keeps_the_first_mentions_and_never_returns_nothing():
    text = _chapter_2()
    named = naming_pattern(["Spitz"])
    assert named is not None
    short = naming_excerpt(text, named, max_words=60)
    assert short is not None and "Spitz" in short
    kept = len(short.replace(GAP, " ").split())
    first = next(s for s in split_sentences(text) if "Spitz" in s.text)
    assert kept <= max(60, 2 * first.words + 60)  # the first mention always, then the budget
    assert short.replace(GAP, " ").split()[: len(first.text.split())] == first.text.split()
    tiny = naming_excerpt(text, named, max_words=1)  # over budget: the first mention still
    assert tiny is not None and "Spitz" in tiny


def test_no_mention_means_none_and_names_match_whole_words_accents_folded():
    named = naming_pattern(["François", "Spitz", ""])
    assert named is not None
    assert naming_excerpt("Buck slept. The snow fell.", named) is None
    assert naming_excerpt("The Spitzbergen dogs slept. Nothing else.", named) is None
    cut = naming_excerpt("Snow fell. Francois laughed. Buck ran. Dogs slept. Night came.", named)
    assert cut == f"{GAP} Francois laughed. Buck ran. {GAP}"
    accented = naming_excerpt("Snow fell. François laughed. Buck ran. Dogs slept.", named)
    assert accented == f"{GAP} François laughed. Buck ran. {GAP}"
    assert naming_pattern(["", "  "]) is None


def test_a_gist_is_the_sentence_holding_most_salient_terms_and_the_next():
    text = _chapter_2()[:3000]
    sentences = [" ".join(s.text.split()) for s in split_sentences(text)]
    spitz = next(i for i, s in enumerate(sentences) if re.search(r"\bSpitz\b", s))
    cut = gist_excerpt(text, ["Spitz", "Spitzbergen"], max_words=10_000)
    assert sentences[spitz] in cut and (spitz + 1 == len(sentences) or sentences[spitz + 1] in cut)
    assert len(cut.replace(GAP, " ").split()) == sum(
        len(s.split()) for s in sentences[spitz : spitz + 2]
    )
    # stemmed as BM25 stems: "whales" finds "whale"; no term found: the first sentence
    assert gist_excerpt("Snow fell. A whale sang. Dogs slept.", ["whales"], 50) == (
        f"{GAP} A whale sang. Dogs slept."
    )
    assert gist_excerpt("Snow fell. A whale sang. Dogs slept.", [], 50) == (
        f"Snow fell. A whale sang. {GAP}"
    )
