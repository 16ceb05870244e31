"""Questions about how the book ends, asked by a reader who has not got there.

With the spoiler limit at chapter 1, "How does the book end?" was answered by the packaged
1.5B model with "The book ends with Buck's death.": invented (no passage up to chapter 1 says
so) and, were it true, a spoiler. The passages a reader may see cannot hold the ending while
the book goes on past their limit, so the honest reply is known without asking a model: the
ending lies ahead. It is given by construction, with the closest passages so far, whenever the
question asks for the ending of the book (not of a scene: "at the end of the chapter" is not
it) and the selected book has text past the reader's limit.
"""

from __future__ import annotations

import re

_WORK = r"(?:book|story|novel|tale)"
# Each form asks for the end of the whole work; "the ending" alone reads as the book's too.
_ENDING = re.compile(
    r"|".join(
        (
            rf"\bhow\s+(?:does|did|will|do)\s+(?:the\s+|this\s+)?(?:{_WORK}|it|it\s+all|"
            rf"everything|things)\s+(?:all\s+)?(?:end|finish|conclude|turn\s+out)\b",
            rf"\b(?:the\s+)?end(?:ing)?\s+of\s+(?:the\s+|this\s+)?{_WORK}\b",
            rf"\b(?:the\s+|this\s+)?{_WORK}(?:'s|’s)\s+end(?:ing)?\b",
            r"\b(?:what\s+is|what's|explain|describe|tell\s+me)\s+(?:about\s+)?the\s+ending\b",
            r"\bwhat\s+happens\s+(?:at|in)\s+the\s+end\s*\??\s*$",
            r"\b(?:last|final|closing)\s+(?:chapter|chapters|pages|scene)\b",
        )
    ),
    re.IGNORECASE,
)


def asks_for_ending(question: str) -> bool:
    """Whether ``question`` asks how the book (not a scene of it) ends."""
    return _ENDING.search(question.strip()) is not None


def ending_ahead_text(title: str, upto_chapter: int) -> str:
    """The reply: the ending lies past the reader's position; nothing of it is said."""
    return (
        f"How {title} ends lies past chapter {upto_chapter}, where you have read to, so it is "
        "not told here: it comes later in the book. The closest passages up to chapter "
        f"{upto_chapter} are below."
    )
