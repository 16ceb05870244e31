"""litrag: narrative-aware retrieval-augmented question answering over novels, for LlamaIndex."""

from litrag.segment import LitSegNodeParser, SegmentationSummary

__all__ = ["LitSegNodeParser", "SegmentationSummary"]
__version__ = "0.1.0"
