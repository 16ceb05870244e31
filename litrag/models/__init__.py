"""The models room: every embedder, the packaged llama.cpp models and their server, and the
clients of served models. It imports nothing of litrag but ``litrag.settings`` and knows no
store, engine or screen; ``litrag.builders`` decides which of these a run gets."""
