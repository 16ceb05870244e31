"""JSON extraction, schema and semantic checks, and repair, on hand-made replies."""

from __future__ import annotations

import pytest

from litrag.segment.validation import (
    Block,
    OutputParseError,
    check_segments,
    extract_json,
    repair,
)


def seg(a, b, sub="s", ctx=()):
    return {"subtitle": sub, "from_idx": a, "to_idx": b, "context_idx": list(ctx)}


@pytest.mark.parametrize(
    "reply",
    [
        '{"segments": []}',
        'Here you go:\n```json\n{"segments": []}\n```\nHope it helps',
        'Sure! {"segments": [],} trailing prose',
        '<think>{"not": "this"} hmm</think>{"segments": []}',
        '{"segments": [\n],\n}',
    ],
)
def test_extract_json_tolerates_wrapping(reply):
    assert extract_json(reply) == {"segments": []}


@pytest.mark.parametrize("reply", ["", "   ", "no json here", "[1, 2, 3]", '{"unclosed": '])
def test_extract_json_rejects_garbage(reply):
    with pytest.raises(OutputParseError):
        extract_json(reply)


def test_valid_lite_schema_with_overlap_and_context():
    obj = {"step1": {}, "step2": {}, "step3": {"segments": [seg(1, 5), seg(5, 9, ctx=[2, 7])]}}
    checked = check_segments(obj, 9)
    assert checked.valid, checked.problems
    # context inside the block's own range is dropped, outside kept
    assert checked.blocks[1] == Block(5, 9, "s", (2,))


def test_string_integers_are_accepted():
    checked = check_segments({"segments": [seg("1", "4"), seg(5.0, "6")]}, 6)
    assert checked.valid
    assert [(b.start, b.end) for b in checked.blocks] == [(1, 4), (5, 6)]


@pytest.mark.parametrize(
    ("segments", "fragment"),
    [
        ([seg(2, 6)], "does not start at 1"),
        ([seg(1, 5)], "does not end at 6"),
        ([seg(1, 2), seg(4, 6)], "not covered by any segment: 3"),
        ([seg(1, 2), seg(4, 6, ctx=[3])], "only in context_idx: 3"),
        ([seg(1, 9)], "outside 1-6"),
        ([seg(4, 1), seg(5, 6)], "from_idx 4 > to_idx 1"),
        ([seg(1, 3, ctx=[0, 99, "x"]), seg(4, 6)], "context index"),
        ([{"from_idx": 1, "to_idx": 6}], "missing subtitle"),
        ([{"subtitle": "x", "from_idx": "one", "to_idx": 6}], "must be integers"),
        ([seg(4, 6), seg(1, 3)], "not in reading order"),
        ([], "is empty"),
    ],
)
def test_semantic_problems_are_reported(segments, fragment):
    checked = check_segments({"segments": segments}, 6)
    assert not checked.valid
    assert any(fragment in p for p in checked.problems), checked.problems


def test_missing_segments_key():
    checked = check_segments({"step1": {"step_1_events": "x"}}, 3)
    assert not checked.valid and "segments" in checked.problems[0]


def covers(blocks, n):
    return {i for b in blocks for i in range(b.start, b.end + 1)} == set(range(1, n + 1))


def test_repair_gives_gaps_to_left_neighbour_and_start_to_right():
    fixed = repair([Block(3, 4, "a"), Block(7, 8, "b")], 10)
    assert [(b.start, b.end) for b in fixed] == [(1, 6), (7, 10)]
    assert covers(fixed, 10)


def test_repair_drops_nested_and_sorts():
    fixed = repair([Block(5, 10, "b"), Block(1, 6, "a"), Block(2, 3, "in")], 10)
    assert [(b.start, b.end, b.subtitle) for b in fixed] == [(1, 6, "a"), (5, 10, "b")]


def test_repair_keeps_only_outside_context():
    fixed = repair([Block(1, 5, "a", (2, 8))], 8)
    assert fixed == [Block(1, 8, "a", ())]
