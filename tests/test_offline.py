"""The offline segmenter: narrative cues in the cut costs, sizes, scene breaks, subtitles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from litrag.segment.offline import (
    OfflineSegmenter,
    StaticVectors,
    boundary_costs,
    window_similarity,
)
from litrag.segment.sentences import split_sentences
from litrag.segment.subtitles import make_subtitles


def flat_vectors(n: int) -> np.ndarray:
    return np.ones((n, 4), dtype=np.float32) / 2.0


def test_window_similarity_finds_the_topic_change():
    vecs = np.array([[1, 0]] * 5 + [[0, 1]] * 5, dtype=np.float32)
    sim = window_similarity(vecs, window=2)
    assert sim.shape == (9,)
    assert int(np.argmin(sim)) == 4  # the cut after sentence 5
    assert sim[0] == pytest.approx(1.0)


def test_cut_costs_follow_narrative_cues():
    text = (
        "The village lay quiet in the snow.\n\n"
        "“Who is there?” asked the miller.\n\n"
        "“Only a traveller,” came the answer.\n\n"
        "He stood by the door a long while.\n\n"
        "The next morning the road was open. It was bright.\n\n"
        "* * *\n\n"
        "Far away, in the city, a letter arrived."
    )
    s = split_sentences(text)
    c = boundary_costs(s, flat_vectors(len(s))).cost
    # equal similarity everywhere, so only the cues differ
    inside_dialogue, before_pronoun, time_leap, mid_paragraph, scene = c[1], c[2], c[3], c[4], c[5]
    assert scene < time_leap < before_pronoun < inside_dialogue < mid_paragraph
    assert c[0] < inside_dialogue  # narration -> dialogue is a fair cut


@pytest.fixture(scope="module")
def chapter_sentences(books_dir):
    raw = (books_dir / "pg215_call_of_the_wild.txt").read_text(encoding="utf-8-sig")
    raw = raw.replace("\r\n", "\n")
    start = raw.index("Buck did not read the newspapers")
    return split_sentences(raw[start : raw.index("Chapter II", start)])


def test_blocks_cover_in_order_within_sizes(chapter_sentences):
    s = chapter_sentences
    costs = boundary_costs(s, StaticVectors().encode([x.flat for x in s]))
    seg = OfflineSegmenter(target_words=250, min_words=100, max_words=400)
    blocks = seg.segment(s, costs)
    assert blocks[0].start == 1 and blocks[-1].end == len(s)
    for a, b in itertools.pairwise(blocks):
        assert b.start == a.end + 1
    sizes = [sum(x.words for x in s[b.start - 1 : b.end]) for b in blocks]
    assert max(sizes) <= 400
    assert sum(sizes) / len(sizes) > 150
    # cuts land on paragraph starts whenever a paragraph boundary is available
    assert all(s[b.start - 1].paragraph_start for b in blocks)


def test_token_cap_is_respected(chapter_sentences):
    s = chapter_sentences
    costs = boundary_costs(s, StaticVectors().encode([x.flat for x in s]))
    tokens = [x.words * 2 for x in s]
    blocks = OfflineSegmenter().segment(s, costs, tokens, max_tokens=300)
    for b in blocks:
        if b.end > b.start:
            assert sum(tokens[b.start - 1 : b.end]) <= 300


def test_scene_break_is_preferred(chapter_sentences):
    s = chapter_sentences[:60]
    text_a = " ".join(x.flat for x in s[:30])
    text_b = " ".join(x.flat for x in s[30:60])
    text = text_a.replace(". ", ".\n\n") + "\n\n* * *\n\n" + text_b.replace(". ", ".\n\n")
    sentences = split_sentences(text)
    brk = next(x.index for x in sentences if x.scene_break)
    costs = boundary_costs(sentences, StaticVectors().encode([x.flat for x in sentences]))
    blocks = OfflineSegmenter(target_words=300, min_words=50, max_words=900).segment(
        sentences, costs
    )
    assert brk in {b.start for b in blocks}


def test_subtitles_name_the_salient_people_and_words():
    texts = [
        "Buck fought Spitz on the snow. Spitz lunged, and Buck broke his leg. The team watched.",
        "Thornton sat by the fire. Thornton fed Buck, and Buck loved Thornton as a master.",
    ]
    subs = make_subtitles(texts)
    assert subs[0].startswith("Spitz") and "Buck" in subs[0]
    assert subs[1].startswith("Thornton")
    assert all(len(x) < 80 for x in subs)
    assert make_subtitles(["the of and"]) == ["passage"]
