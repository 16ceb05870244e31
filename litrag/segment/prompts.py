"""Prompts for LitSeg-Lite (one call) and LitSeg (three calls).

They carry the paper's narratological workflow (events -> threads -> turning points), its
constraints and its output schema (LitSeg paper, Appendix D), worded for this project. Bump
``PROMPT_VERSION`` whenever a prompt changes: it is part of every cache key.
"""

from __future__ import annotations

from collections.abc import Sequence

from litrag.segment.quoting import DATA_RULE, neutralise, quoted_line
from litrag.segment.sentences import Sentence

PROMPT_VERSION = "litseg-prompts-2"  # 2: the chapter as quoted data (quoting.py)

_ROLE_HEAD = (
    """\
# Role
You are a literary editor and narratologist. You cut chapters of fiction into self-contained plot \
blocks that a reader can understand on their own, and you answer in strict JSON.

# Constraints
1. Granularity follows the narrative: a block should usually stay under about 100 sentences, but \
never merge distinct plot blocks or cut a coherent one just to hit a number.
2. Overlap is optional: adjacent blocks may share a few key sentences only when continuity needs \
it; otherwise make a clean cut.
3. Each block gets a short subtitle naming its core action or reversal.
4. Cover the whole text in order: every sentence must lie inside the from_idx..to_idx range of at \
least one block.
5. Indices are the 1-based numbers shown as [n] before each sentence, inclusive. The first block \
starts at 1; the last block ends at the last index.
6. context_idx lists sentences outside a block's range that the block needs to be understood (an \
antecedent, a setup). A sentence may never appear only in context_idx.
7. The chapter comes inside <chapter> tags and its title inside <title> tags. """
    + DATA_RULE
    + """

# Narratological workflow"""
)

_STEP1 = """\
Step 1, events: keep dynamic events only: changes of state (physical or mental) and process events \
(acts, speech, thought, feeling). Drop static descriptions, portraits, generic statements, \
counterfactuals and questions. For a doubtful paragraph, count its narrative features (situation, \
agent, sequence of actions, object, place, time, reason): the more it has, the more it is an \
event."""

_STEP2 = """\
Step 2, threads: group events by unity of action (one complete core action, not one character); \
link events that unfold the same secret; keep parallel and minor threads separate (A1 B1 A2 B2); \
mark each thread's level: extradiegetic (frame), intradiegetic (main plot) or metadiegetic (a \
story told inside the story); note each thread's shifts of time, place and perspective."""

_STEP3 = """\
Step 3, turning points and cuts: cut at the transitions of the tension arc (opportunity, change of \
plans, point of no return, setback or reversal, climax and recognition, aftermath); at clear leaps \
of time, place or perspective, and at switches between threads or narrative levels; where a \
situation moves to a new equilibrium or an action's outcome is revealed. Then place the cut \
exactly: never inside a tightly bound run (question and answer, attack and defence, a chain of \
pronouns, an immediate reaction); cut right before the sentence that can stand alone and opens a \
new topic, phase or action."""

_ROLE = "\n".join((_ROLE_HEAD, _STEP1, _STEP2, _STEP3))

LITE_SYSTEM = (
    _ROLE
    + """

# Task
Run all three steps internally, then answer with STRICT JSON only (no markdown) in this shape:
{"step1": {"step_1_events": "the core dynamic events, briefly"},
 "step2": {"step_2_threads": "the narrative threads and their levels, briefly"},
 "step3": {"chapter_title": "title or identifier of the chapter",
           "step_3_turning_points": [{"type": "kind of turning point", "description": "why"}],
           "segments": [{"subtitle": "short subtitle", "from_idx": 1, "to_idx": 12,
                         "context_idx": []}]}}
from_idx and to_idx are integers; context_idx is a list of integers (may be empty)."""
)

# The ablations of the paper's Appendix D.4, as single-stage variants: LitSeg-Lite's prompt with one
# theory step removed (its JSON field goes too), or with no narratology at all.
_SEGMENTS_SHAPE = """"segments": [{"subtitle": "short subtitle", "from_idx": 1, "to_idx": 12,
                         "context_idx": []}]"""
_TASK = """

# Task
Run {steps} internally, then answer with STRICT JSON only (no markdown) in this shape:
{shape}
from_idx and to_idx are integers; context_idx is a list of integers (may be empty)."""
_STEP3_PLAIN = "Step 3, cuts: use the results of the earlier steps to cut the text directly."
_GENERIC_ROLE = _ROLE_HEAD.split("# Constraints")[1].split("# Narratological workflow")[0]


def _variant(head: str, steps: tuple[str, ...], which: str, shape: str) -> str:
    return "\n".join((head, *steps)) + _TASK.format(steps=which, shape=shape)


LITE_VARIANTS: dict[str, str] = {
    "full": LITE_SYSTEM,
    # w/o Theo.S.1: no event extraction
    "no-events": _variant(
        _ROLE_HEAD,
        (_STEP2.replace("group events", "group the chapter's actions"), _STEP3),
        "Steps 2 and 3",
        '{"step2": {"step_2_threads": "the narrative threads and their levels, briefly"},\n'
        ' "step3": {"chapter_title": "title or identifier of the chapter",\n'
        '           "step_3_turning_points": [{"type": "kind of turning point", '
        '"description": "why"}],\n           ' + _SEGMENTS_SHAPE + "}}",
    ),
    # w/o Theo.S.2: no narrative threads
    "no-threads": _variant(
        _ROLE_HEAD,
        (
            _STEP1,
            _STEP3.replace("switches between threads or narrative levels", "switches of focus"),
        ),
        "Steps 1 and 3",
        '{"step1": {"step_1_events": "the core dynamic events, briefly"},\n'
        ' "step3": {"chapter_title": "title or identifier of the chapter",\n'
        '           "step_3_turning_points": [{"type": "kind of turning point", '
        '"description": "why"}],\n           ' + _SEGMENTS_SHAPE + "}}",
    ),
    # w/o Theo.S.3: no turning points; the cut follows steps 1 and 2 directly
    "no-turning-points": _variant(
        _ROLE_HEAD,
        (_STEP1, _STEP2, _STEP3_PLAIN),
        "all three steps",
        '{"step1": {"step_1_events": "the core dynamic events, briefly"},\n'
        ' "step2": {"step_2_threads": "the narrative threads and their levels, briefly"},\n'
        ' "step3": {"chapter_title": "title or identifier of the chapter",\n'
        "           " + _SEGMENTS_SHAPE + "}}",
    ),
    # w/o Theory: a generic semantic segmentation prompt, the same constraints and indices
    "no-theory": (
        "# Role\nYou split texts into segments by their semantic content, so that each segment "
        "can be read and understood on its own, and you answer in strict JSON.\n\n# Constraints"
        + _GENERIC_ROLE.rstrip()
        + _TASK.format(
            steps="the segmentation",
            shape='{"chapter_title": "title or identifier of the text",\n ' + _SEGMENTS_SHAPE + "}",
        )
    ),
}


def lite_system(variant: str = "full") -> str:
    """LitSeg-Lite's system prompt, or one of the paper's ablation variants (``LITE_VARIANTS``)."""
    try:
        return LITE_VARIANTS[variant]
    except KeyError:
        raise ValueError(
            f"unknown prompt variant {variant!r}: use one of {', '.join(LITE_VARIANTS)}"
        ) from None


LITE_USER = """\
[Chapter: {title}]
[Sentences: 1 to {last_index}]
<chapter>
{numbered}
</chapter>

Return the STRICT JSON object now. The first segment starts at 1 and the last ends at \
{last_index}."""

STAGED_SYSTEM = (
    _ROLE
    + """

# Task
You will be asked for one step at a time; answer each with STRICT JSON only (no markdown), in the \
shape the request gives."""
)

STAGE1_USER = """\
Run ONLY Step 1 (events).
[Chapter: {title}]
<chapter>
{numbered}
</chapter>

Return STRICT JSON: {{"step_1_events": "the core dynamic events, briefly"}}"""

STAGE2_USER = """\
Run ONLY Step 2 (threads), using the chapter and the Step 1 result.
[Chapter: {title}]
<chapter>
{numbered}
</chapter>
[Step 1 result]
{step1}

Return STRICT JSON: {{"step_2_threads": "the narrative threads and their levels, briefly"}}"""

STAGE3_USER = """\
Run ONLY Step 3 (turning points and segmentation), using the chapter and the results of Steps 1 \
and 2.
[Chapter: {title}]
[Sentences: 1 to {last_index}]
<chapter>
{numbered}
</chapter>
[Step 1 result]
{step1}
[Step 2 result]
{step2}

Return STRICT JSON:
{{"chapter_title": "title or identifier",
 "step_3_turning_points": [{{"type": "kind of turning point", "description": "why"}}],
 "segments": [{{"subtitle": "short subtitle", "from_idx": 1, "to_idx": 12, "context_idx": []}}]}}
The first segment starts at 1 and the last ends at {last_index}."""

RETRY_USER = """\
Your answer could not be used: {problems}
Answer again with the complete STRICT JSON object only. Indices run from 1 to {last_index}; the \
first segment starts at 1, the last ends at {last_index}, and every sentence lies in some \
segment's from_idx..to_idx range."""


def number_sentences(sentences: Sequence[Sentence]) -> str:
    """``[1] First sentence.`` lines, numbered from 1 within the unit, each neutralised (the
    lines go inside ``<chapter>`` tags: book text is quoted data, ``litrag.segment.quoting``)."""
    return "\n".join(f"[{i}] {neutralise(s.flat)}" for i, s in enumerate(sentences, start=1))


def chapter_title(title: str) -> str:
    """A unit's title as the user prompts' ``[Chapter: ...]`` line holds it."""
    return f"<title>{quoted_line(title or 'untitled')}</title>"
