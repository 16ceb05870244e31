"""Teacher data: LitSeg's three stages over books, kept where valid, as LitSeg-Lite SFT records.

Each unit (a chapter, or a part of one longer than ``max_unit_words``) goes through the
three-stage teacher (``LitSeg``) with the segmenters' caller: concurrent, timed out, cached on
disk (a killed run resumes without paying again). A unit is kept only when its stage-1 and
stage-2 replies parsed and its stage-3 reply passed validation without repair; the record is
then written in LitSeg-Lite's single-stage schema, as the chat the student will see at
inference: the single-stage system prompt, the single-stage user prompt, and the answer
``{"step1": ..., "step2": ..., "step3": {..., "segments": [...]}}``.

Train and validation are split by book, never by chapter, so validation measures new books.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.llms import LLM

from litrag.distill.config import AnnotateConfig
from litrag.segment import prompts
from litrag.segment.cache import ResponseCache
from litrag.segment.llm_calls import LLMCaller, await_all, llm_identity
from litrag.segment.llm_segmenters import VALID, LitSeg, UnitResult
from litrag.segment.sentences import Sentence, split_sentences
from litrag.segment.units import split_unit

RECORDS_FILE = "sft.jsonl"
MANIFEST_FILE = "manifest.json"
TRAIN, VALIDATION = "train", "validation"


@dataclass
class TeacherUnit:
    """One unit of a book, as the teacher and the student see it."""

    book_id: str
    book_title: str
    chapter_index: int
    chapter_title: str
    part: int
    sentences: list[Sentence]

    @property
    def numbered(self) -> str:
        return prompts.number_sentences(self.sentences)

    def lite_messages(self) -> list[dict[str, str]]:
        """The student's prompt: single-stage system and user messages."""
        user = prompts.LITE_USER.format(
            title=prompts.chapter_title(self.chapter_title),
            last_index=len(self.sentences),
            numbered=self.numbered,
        )
        return [
            {"role": "system", "content": prompts.LITE_SYSTEM},
            {"role": "user", "content": user},
        ]


def plan_units(
    books: Sequence[str | Path],
    max_unit_words: int,
    chapters: set[int] | None = None,
) -> list[TeacherUnit]:
    """Every unit of ``books`` (only the ``chapters`` indices, when given), in reading order."""
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book

    units: list[TeacherUnit] = []
    for path in books:
        book = load_book(path)
        for doc in split_chapters(book):
            index = int(doc.metadata.get("chapter_index", 0))
            if chapters is not None and index not in chapters:
                continue
            sentences = split_sentences(doc.text)
            title = str(doc.metadata.get("chapter_title") or "")
            for k, part in enumerate(split_unit(sentences, max_unit_words)):
                units.append(TeacherUnit(book.book_id, book.title, index, title, k, part))
    return units


def split_books(
    book_ids: Sequence[str], fraction: float, seed: int = 42, validation: Sequence[str] = ()
) -> dict[str, list[str]]:
    """Assign whole books to train and validation.

    ``validation`` names the held-out books outright; otherwise ``round(fraction * books)``
    books (at least one when there are two or more books and ``fraction > 0``) are chosen by a
    seeded hash, so the split does not depend on the order books were given in.
    """
    ids = sorted(set(book_ids))
    if validation:
        unknown = sorted(set(validation) - set(ids))
        if unknown:
            raise ValueError(f"validation books not among the annotated ones: {unknown}")
        held = sorted(set(validation))
    else:
        n = round(fraction * len(ids))
        if fraction > 0 and len(ids) >= 2:
            n = max(n, 1)
        n = min(n, len(ids) - 1) if len(ids) >= 2 else 0
        rank = sorted(ids, key=lambda b: hashlib.sha256(f"{seed}:{b}".encode()).hexdigest())
        held = sorted(rank[:n])
    return {TRAIN: [b for b in ids if b not in held], VALIDATION: held}


def teacher_answer(unit: TeacherUnit, result: UnitResult) -> dict[str, Any]:
    """The teacher's valid annotation in LitSeg-Lite's single-stage schema."""
    final = result.stages.get("final") or {}
    turning = final.get("step_3_turning_points")
    step3: dict[str, Any] = {
        "chapter_title": str(final.get("chapter_title") or unit.chapter_title or "untitled"),
        "step_3_turning_points": turning if isinstance(turning, list) else [],
        "segments": [
            {
                "subtitle": b.subtitle,
                "from_idx": b.start,
                "to_idx": b.end,
                "context_idx": list(b.context),
            }
            for b in result.blocks
        ],
    }
    return {
        "step1": {"step_1_events": result.stages.get("step1", "")},
        "step2": {"step_2_threads": result.stages.get("step2", "")},
        "step3": step3,
    }


def rejection(result: UnitResult) -> str | None:
    """Why a unit's annotation is not kept (None: it is)."""
    if result.outcome != VALID:
        return result.outcome  # "repaired" or "fallback"
    if not result.stages.get("s1_parsed", False):
        return "step1_unparsed"
    if not result.stages.get("s2_parsed", False):
        return "step2_unparsed"
    return None


def sft_record(unit: TeacherUnit, result: UnitResult, split: str) -> dict[str, Any]:
    answer = json.dumps(teacher_answer(unit, result), ensure_ascii=False)
    return {
        "messages": [*unit.lite_messages(), {"role": "assistant", "content": answer}],
        "split": split,
        "book_id": unit.book_id,
        "chapter_index": unit.chapter_index,
        "unit_part": unit.part,
        "n_sentences": len(unit.sentences),
        "passage": unit.numbered,
        "teacher_attempts": result.attempts,
        "teacher_outcome": rejection(result) or VALID,
    }


def teacher_caller(
    llm: LLM, cfg: AnnotateConfig, cache_dir: str | Path | None, identity: str | None = None
) -> LLMCaller:
    """The teacher's caller: Table 11's sampling, the reply cache under ``cache_dir``."""
    cache = ResponseCache(Path(cache_dir) / "llm_replies.sqlite") if cache_dir else None
    caller = LLMCaller(llm, cfg.sampling(), cfg.timeout, cache)
    caller.identity = identity or caller.identity
    return caller


async def arun_teacher(
    units: Sequence[TeacherUnit], caller: LLMCaller, cfg: AnnotateConfig, show_progress: bool
) -> list[UnitResult]:
    """LitSeg over every unit, ``cfg.workers`` units in flight."""
    teacher = LitSeg(caller, max_retries=cfg.max_retries)
    gate = asyncio.Semaphore(cfg.workers)
    results: list[UnitResult | None] = [None] * len(units)

    async def run(i: int) -> None:
        async with gate:
            results[i] = await teacher.asegment(units[i].sentences, units[i].chapter_title)

    tasks = [asyncio.ensure_future(run(i)) for i in range(len(units))]
    await await_all(tasks, show_progress=show_progress, desc="Teacher")
    return [r for r in results if r is not None]


def annotate(
    books: Sequence[str | Path],
    llm: LLM,
    out_dir: str | Path,
    cfg: AnnotateConfig | None = None,
    *,
    chapters: set[int] | None = None,
    cache_dir: str | Path | None = None,
    teacher_model: str | None = None,
    validation_books: Sequence[str] = (),
    show_progress: bool = False,
) -> dict[str, Any]:
    """Annotate ``books`` with the teacher; write ``sft.jsonl`` and ``manifest.json`` under
    ``out_dir`` (the reply cache defaults to ``out_dir/cache``); return the manifest."""
    cfg = cfg or AnnotateConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    units = plan_units(books, cfg.max_unit_words, chapters)
    if not units:
        raise ValueError("no chapters to annotate (check BOOKS and --chapters)")
    split = split_books(
        [u.book_id for u in units], cfg.validation_fraction, cfg.seed, validation_books
    )
    split_of = {b: s for s, ids in split.items() for b in ids}
    caller = teacher_caller(llm, cfg, cache_dir if cache_dir is not None else out / "cache")
    try:
        results = asyncio.run(arun_teacher(units, caller, cfg, show_progress))
    finally:
        if caller.cache is not None:
            caller.cache.close()
    rejected: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    kept_anyway = 0
    tmp = out / (RECORDS_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for unit, result in zip(units, results, strict=True):
            why = rejection(result)
            if why is not None:
                rejected[why] += 1
                if cfg.strict:
                    continue
                kept_anyway += 1
            s = split_of[unit.book_id]
            counts[s] += 1
            fh.write(json.dumps(sft_record(unit, result, s), ensure_ascii=False) + "\n")
    tmp.replace(out / RECORDS_FILE)
    manifest = {
        "teacher_model": teacher_model or getattr(llm, "model", None) or llm_identity(llm),
        "teacher_identity": caller.identity,
        "prompt_version": prompts.PROMPT_VERSION,
        "schema": "litseg-lite: step1.step_1_events, step2.step_2_threads, step3.segments",
        "books": sorted({u.book_id for u in units}),
        "units": len(units),
        "valid": len(units) - sum(rejected.values()),
        "rejected": sum(rejected.values()),
        "rejected_by_reason": dict(sorted(rejected.items())),
        "strict": cfg.strict,
        "kept_rejected": kept_anyway,
        "records": sum(counts.values()),
        "split": {**split, "records": {TRAIN: counts[TRAIN], VALIDATION: counts[VALIDATION]}},
        "llm_calls": sum(r.calls for r in results),
        "cached_calls": sum(r.cached_calls for r in results),
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "completion_tokens": sum(r.completion_tokens for r in results),
        "seconds": round(time.perf_counter() - t0, 2),
        "config": cfg.model_dump(),
        "records_file": RECORDS_FILE,
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def read_records(data_dir: str | Path, split: str | None = None) -> list[dict[str, Any]]:
    """The SFT records under ``data_dir`` (a folder holding ``sft.jsonl``, or the file)."""
    path = Path(data_dir)
    if path.is_dir():
        path = path / RECORDS_FILE
    if not path.is_file():
        raise ValueError(f"no {RECORDS_FILE} at {data_dir}: run `litrag distill annotate` first")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [r for r in rows if split is None or r.get("split") == split]
