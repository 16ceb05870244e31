"""What a question to the library is, checked once for every entry point: ``litrag ask`` and the
chat UI's API (``/answer``) build the same ``AskRequest``.

Why: the UI's API is reachable by anything on the machine, and it skipped the CLI's checks (a
``top_k`` of -3 gave no sources, ``"abc"`` a TypeError, ``books="pg215"`` was split into letters,
a 100,000-character question came back empty with no error). Here types are strict (no string
split into a list, no float taken as a chapter), numbers are finite and bounded, the question has
a length cap, and a bad field is one line that names it (``AskRequestError``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "MAX_BOOKS",
    "MAX_QUESTION_CHARS",
    "MAX_TOP_K",
    "AskRequest",
    "AskRequestError",
    "spoiler_value",
]

MAX_QUESTION_CHARS = 2000  # a question, not a document: ~400 words, well inside any prompt
MAX_BOOKS = 50
MAX_TOP_K = 50  # blocks in one prompt; the presets use 5
MAX_CHAPTER = 100_000  # more than any book has; the book's own count bounds it further


class AskRequestError(ValueError):
    """A request field that is not acceptable; the message is one line naming the field."""


class AskRequest(BaseModel):
    """One question about the library's books, as any entry point receives it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    question: str = Field(
        description="The question; whitespace runs become one space. 1 to "
        f"{MAX_QUESTION_CHARS} characters.",
    )
    books: list[str] = Field(
        min_length=1,
        max_length=MAX_BOOKS,
        description="Book ids to search (a list, even for one book; see `litrag books`).",
    )
    upto_chapter: int | None = Field(
        default=None,
        ge=0,
        le=MAX_CHAPTER,
        description="Spoiler limit: nothing past this chapter (0: front matter only); None: "
        "no limit. ``check_chapters`` bounds it by the books' chapter count.",
    )
    top_k: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOP_K,
        description="Blocks given to the LLM; None: the retrieval preset's.",
    )
    use_llm: bool = Field(default=True, description="False: an extractive answer, no LLM.")
    retrieval: str | None = Field(
        default=None, description="Retrieval preset ('embedded' or 'paper'); None: the setting."
    )

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        flat = " ".join(value.split())
        if not flat:
            raise ValueError("the question is empty")
        if len(flat) > MAX_QUESTION_CHARS:
            raise ValueError(
                f"the question is {len(flat):,} characters long; the limit is "
                f"{MAX_QUESTION_CHARS:,} (ask it shorter)"
            )
        return flat

    @field_validator("books")
    @classmethod
    def _books(cls, value: list[str]) -> list[str]:
        ids = [b.strip() for b in value]
        if any(not b or len(b) > 200 for b in ids):
            raise ValueError("each book id is a non-empty id like pg215 (see: litrag books)")
        return list(dict.fromkeys(ids))

    @field_validator("retrieval")
    @classmethod
    def _retrieval(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if value not in ("embedded", "paper"):
            raise ValueError(f"the retrieval preset is 'embedded' or 'paper', not {value!r}")
        return value

    @classmethod
    def parse(cls, names: Mapping[str, str] | None = None, **fields: Any) -> AskRequest:
        """The request, or ``AskRequestError`` naming the first bad field (as ``names`` spells
        it, e.g. ``{"upto_chapter": "--upto-chapter"}`` for the CLI)."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise AskRequestError(_one_line(exc, names or {})) from None

    def check_chapters(
        self, chapters: int | None, name: str = "upto_chapter", first: int = 0
    ) -> None:
        """``AskRequestError`` when the spoiler limit is past the books' last chapter, or
        before ``first`` (the CLI's ``--upto-chapter`` counts from 1: a 0 asked about nothing
        and answered "Nothing ... matches"; the UI's slider keeps 0 for "not begun")."""
        limit = self.upto_chapter
        if limit is None:
            return
        if first <= limit <= (chapters if chapters is not None else limit):
            if chapters == 1 and limit >= 1:
                # A book found to be one unit (its headings not recognised, or none): the limit
                # would hide nothing of it, while the reader trusts it to (issue 50, bug 12).
                raise AskRequestError(
                    f"{name} cannot hide anything: the book is one chapter (no chapter "
                    f"headings were found in it); ask without {name}"
                )
            return
        if not chapters:
            raise AskRequestError(f"{name} must be a chapter from {first} on, got {limit}")
        where = f"1-{chapters}" if chapters > 1 else "1"
        raise AskRequestError(f"{name} must be a chapter of the book ({where}), got {limit}")


def spoiler_value(value: Any, name: str = "upto") -> int | None:
    """A spoiler slider's value as a chapter number: None stays None; a finite number >= 0 is
    cut to an int; NaN, infinities, negatives, booleans and text are ``AskRequestError``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AskRequestError(f"{name} must be a chapter number, got {value!r}")
    if not math.isfinite(value):
        raise AskRequestError(f"{name} must be a finite chapter number, got {value!r}")
    if value < 0 or value > MAX_CHAPTER:
        raise AskRequestError(f"{name} must be between 0 and {MAX_CHAPTER:,}, got {value!r}")
    return int(value)


def _one_line(exc: ValidationError, names: Mapping[str, str]) -> str:
    err = exc.errors()[0]
    loc = [str(part) for part in err.get("loc", ())]
    field = names.get(loc[0], loc[0]) if loc else "request"
    where = field + "".join(f"[{part}]" for part in loc[1:])
    kind = str(err.get("type", ""))
    given = err.get("input")
    if kind == "value_error":  # our own validators: their message says it all
        return str(err.get("msg", "")).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return f"unknown field {where!r}"
    if kind == "missing":
        return f"{where} is missing"
    return f"{where}: {err.get('msg', 'invalid')} (got {_short(given)})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
