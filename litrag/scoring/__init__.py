"""How a text is scored against a question: BM25, hybrid fusion, sentence windows."""
