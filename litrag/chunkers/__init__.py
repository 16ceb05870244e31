"""Reference chunkers, each a LlamaIndex ``NodeParser`` importable on its own.

``baselines`` (token, recursive character, sentence, paragraph, semantic, dynamic merge),
``lumberchunker``, ``perplexity`` and ``margin``. Beside the node parser rather than inside it:
they may use ``litrag.segment`` and ``litrag.models`` (the perplexity scorer runs llama.cpp in a
child process), and nothing else of litrag. Heavy packages are imported when used, not here.
"""
