"""Tolerant JSON extraction, strict schema and semantic checks, and repair of LLM segmentations.

Checks follow the LitSeg paper: parsable JSON with the required fields; integer indices in range;
first ``from_idx`` = 1, last ``to_idx`` = N; ``from_idx <= to_idx``; valid context indices; no
sentence only in a context list; every sentence covered. Output with problems is retried by the
caller; what survives every retry is repaired here (gaps go to the left-adjacent segment, the
right one at the start) or, when nothing parsed, replaced by one whole-unit block.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class OutputParseError(ValueError):
    """The LLM's reply holds no usable JSON object."""


@dataclass(frozen=True, slots=True)
class Block:
    """A plot block: an inclusive 1-based sentence range, its subtitle and context sentences."""

    start: int
    end: int
    subtitle: str = ""
    context: tuple[int, ...] = ()


@dataclass
class Checked:
    """Segments read from one reply, with every problem found in them."""

    blocks: list[Block] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return bool(self.blocks) and not self.problems


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: tolerates code fences, prose around it, trailing commas
    and a ``<think>`` block."""
    if not text or not text.strip():
        raise OutputParseError("empty reply")
    text = _THINK.sub("", text)
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for cand in candidates:
        for variant in (cand, _TRAILING_COMMA.sub(r"\1", cand)):
            pos = variant.find("{")
            while pos != -1:
                try:
                    obj, _ = decoder.raw_decode(variant, pos)
                except json.JSONDecodeError:
                    pos = variant.find("{", pos + 1)
                    continue
                if isinstance(obj, dict):
                    return obj
                pos = variant.find("{", pos + 1)
    raise OutputParseError("no JSON object found in the reply")


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def find_segments(obj: dict[str, Any]) -> list[Any] | None:
    """The ``segments`` list, at the top level or under ``step3`` (LitSeg-Lite's schema)."""
    for holder in (obj.get("step3"), obj):
        if isinstance(holder, dict) and isinstance(holder.get("segments"), list):
            return holder["segments"]
    return None


def check_segments(obj: dict[str, Any], n: int) -> Checked:
    """Read segments for a unit of ``n`` sentences, listing every schema and semantic problem.

    Blocks are kept whenever their indices are integers, so a reply with problems can still be
    repaired if no retry does better.
    """
    out = Checked()
    raw = find_segments(obj)
    if raw is None:
        out.problems.append('no "segments" list (expected under "step3")')
        return out
    if not raw:
        out.problems.append('"segments" is empty')
        return out
    for k, seg in enumerate(raw, start=1):
        if not isinstance(seg, dict):
            out.problems.append(f"segment {k} is not an object")
            continue
        a, b = _as_int(seg.get("from_idx")), _as_int(seg.get("to_idx"))
        if a is None or b is None:
            out.problems.append(f"segment {k}: from_idx/to_idx must be integers")
            continue
        subtitle = seg.get("subtitle")
        if not isinstance(subtitle, str) or not subtitle.strip():
            out.problems.append(f"segment {k}: missing subtitle")
            subtitle = ""
        if a > b:
            out.problems.append(f"segment {k}: from_idx {a} > to_idx {b}")
            a, b = b, a
        if a < 1 or b > n:
            out.problems.append(f"segment {k}: range {a}-{b} outside 1-{n}")
            a, b = max(a, 1), min(b, n)
            if a > b:
                continue
        ctx_raw = seg.get("context_idx", [])
        if ctx_raw is None:
            ctx_raw = []
        if not isinstance(ctx_raw, list):
            ctx_raw = [ctx_raw]
        ctx: list[int] = []
        for c in ctx_raw:
            ci = _as_int(c)
            if ci is None or not 1 <= ci <= n:
                out.problems.append(f"segment {k}: context index {c!r} is not in 1-{n}")
            elif not a <= ci <= b:
                ctx.append(ci)
        out.blocks.append(Block(a, b, subtitle.strip(), tuple(sorted(set(ctx)))))
    if not out.blocks:
        return out
    if [x.start for x in out.blocks] != sorted(x.start for x in out.blocks):
        out.problems.append("segments are not in reading order")
    if min(x.start for x in out.blocks) != 1:
        out.problems.append("the first segment does not start at 1")
    if max(x.end for x in out.blocks) != n:
        out.problems.append(f"the last segment does not end at {n}")
    covered = _covered(out.blocks, n)
    missing = [i for i in range(1, n + 1) if not covered[i]]
    if missing:
        in_context = {c for x in out.blocks for c in x.context}
        only_ctx = [i for i in missing if i in in_context]
        if only_ctx:
            out.problems.append(f"sentences only in context_idx: {_ranges(only_ctx)}")
        out.problems.append(f"sentences not covered by any segment: {_ranges(missing)}")
    return out


def _covered(blocks: list[Block], n: int) -> list[bool]:
    covered = [False] * (n + 1)
    for x in blocks:
        for i in range(x.start, x.end + 1):
            covered[i] = True
    return covered


def _ranges(idx: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``: short enough to show the LLM on a retry."""
    parts: list[str] = []
    start = prev = idx[0]
    for i in [*idx[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}-{prev}" if start != prev else str(start))
        if i is not None:
            start = prev = i
    return ", ".join(parts[:12]) + (" ..." if len(parts) > 12 else "")


def repair(blocks: list[Block], n: int) -> list[Block]:
    """Make a coverage-complete, ordered segmentation out of blocks with problems.

    Blocks nested inside an earlier one are dropped; each uncovered run is appended to its
    left-adjacent block, or to the right one when the run opens the unit.
    """
    ordered = sorted(blocks, key=lambda x: (x.start, -x.end))
    kept: list[Block] = []
    for x in ordered:
        if kept and x.end <= kept[-1].end:
            continue  # nested in (or equal to) the previous block
        kept.append(x)
    if not kept:
        return [Block(1, n)]
    fixed: list[Block] = []
    for x in kept:
        if not fixed:
            fixed.append(Block(1, x.end, x.subtitle, x.context) if x.start > 1 else x)
            continue
        prev = fixed[-1]
        if x.start > prev.end + 1:  # gap: give it to the left neighbour
            fixed[-1] = Block(prev.start, x.start - 1, prev.subtitle, prev.context)
        fixed.append(x)
    last = fixed[-1]
    if last.end < n:
        fixed[-1] = Block(last.start, n, last.subtitle, last.context)
    return [
        Block(x.start, x.end, x.subtitle, tuple(c for c in x.context if not x.start <= c <= x.end))
        for x in fixed
    ]
