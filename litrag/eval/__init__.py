"""Evaluation: gold-span relevance, metrics, the judge, the retrieval and answer runs, reports."""
