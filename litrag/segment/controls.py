"""Control characters out of book text: terminal escape sequences (CSI, OSC), the bell, and
every other C0 / C1 control but tab and newline.

Why: a book is text from the internet, and its text is printed (``litrag ask --full``), shown in
the UI and put into prompts. An OSC sequence can retitle or hijack a terminal, a bell rings, a
stray NUL or ESC is no part of any story. The loader strips them once, before any offset is
taken (so sentence and chapter offsets index the cleaned text), and whatever prints book or model
text strips again (stores filled before this rule, a model that echoes them).
"""

from __future__ import annotations

import re

__all__ = ["count_controls", "strip_controls"]

# Whole sequences first, so their parameters ("[31m", "]0;title") do not stay behind as text:
# OSC (ESC ] ... BEL or ST), DCS / SOS / PM / APC strings, CSI (ESC [ or the C1 CSI), then any
# other two-character escape.
_SEQUENCES = re.compile(
    r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -~]?"
)
# Vertical tab and form feed break a line: they become a newline, the rest go.
_BREAKS = str.maketrans({"\x0b": "\n", "\x0c": "\n"})
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\r]")
_ANY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """``text`` without escape sequences and control characters (tab and newline kept; vertical
    tab and form feed become newlines; a lone carriage return goes, so normalise CRLF first)."""
    if _ANY.search(text) is None:
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text).translate(_BREAKS))


def count_controls(text: str) -> int:
    """How many control characters ``text`` holds (tab and newline not counted)."""
    return len(_ANY.findall(text))
