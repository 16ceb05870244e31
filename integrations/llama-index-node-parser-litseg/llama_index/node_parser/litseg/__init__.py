"""LitSeg for LlamaIndex: ``from llama_index.node_parser.litseg import LitSegNodeParser``.

The parser is litrag's own (``litrag.LitSegNodeParser``, from its lean base install), re-exported
under LlamaHub's import path: one class, so ``to_dict`` / ``from_dict``, the ``IngestionCache``
key and every fix are litrag's.
"""

from litrag.segment import LitSegNodeParser

__all__ = ["LitSegNodeParser"]
