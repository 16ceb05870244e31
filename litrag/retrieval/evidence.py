"""The paragraph that ranked a block (small-to-big), carried on the block and shown first.

The retriever marks the winning child's span on the block it returns (``with_evidence``);
``Source`` reads it back as text (``evidence_text``); the CLI and the chat open a long passage on
it (``from_evidence``), so a reader sees the part that matched without scrolling.
"""

from __future__ import annotations

from llama_index.core.schema import BaseNode, MetadataMode

EVIDENCE_KEYS = ("evidence_start", "evidence_end")  # the winning child, in the block's text


def with_evidence(block: BaseNode, child: BaseNode) -> BaseNode:
    """``block`` with the span of ``child`` (its paragraph that ranked it) in its metadata, as
    offsets into the block's text; kept out of the embedding and LLM views."""
    a, b = block.start_char_idx, child.start_char_idx
    if a is None or b is None or child.end_char_idx is None:
        return block
    start = max(b - a, 0)
    end = max(min(child.end_char_idx - a, len(block.get_content(MetadataMode.NONE))), start)
    block.metadata[EVIDENCE_KEYS[0]], block.metadata[EVIDENCE_KEYS[1]] = start, end
    for keys in (block.excluded_embed_metadata_keys, block.excluded_llm_metadata_keys):
        keys.extend(k for k in EVIDENCE_KEYS if k not in keys)
    return block


def evidence_text(node: BaseNode) -> str | None:
    """The winning child's text, from the offsets ``with_evidence`` put on the block."""
    a, b = (node.metadata.get(k) for k in EVIDENCE_KEYS)
    if not isinstance(a, int) or not isinstance(b, int) or b <= a:
        return None
    return node.get_content(metadata_mode=MetadataMode.NONE)[a:b] or None


def from_evidence(text: str, evidence: str | None, chars: int) -> tuple[str, bool]:
    """``text`` with whitespace folded, opening at ``evidence`` when the evidence lies past the
    start of a text longer than ``chars`` (it would be cut off); and whether it was moved."""
    flat = " ".join(text.split())
    at = flat.find(" ".join(evidence.split())) if evidence else -1
    if at > 0 and len(flat) > chars:
        return flat[at:], True
    return flat, False
