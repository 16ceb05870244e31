"""The narrative node parser: sentences, prompts, validation, segmenters, reconstruction.

This subpackage knows nothing of Qdrant or Gradio: it is the part other LlamaIndex apps import.
"""

from litrag.segment.llm_parser import LLMNodeParser
from litrag.segment.parser import LitSegNodeParser, SegmentationSummary

__all__ = ["LLMNodeParser", "LitSegNodeParser", "SegmentationSummary"]
