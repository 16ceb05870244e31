"""Retrieval evaluation: gold-span relevance, ranking metrics and reference chunkers."""
