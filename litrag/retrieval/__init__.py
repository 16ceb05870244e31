"""Retrieval: the book retriever (blocks ranked through their paragraph children), the rerankers
(node postprocessors run on its spoiler-safe candidates) and the evidence each hit carries.
"""
