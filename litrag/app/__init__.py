"""The Gradio chat (``litrag chat``): a reader's UI over one library, served by one process.

``service`` holds what the process shares (the store, the embedder, the LLM, the library) and
answers questions without knowing Gradio; ``chat`` builds the ``gr.Blocks`` on it; ``handoff``
lets other ``litrag`` commands find a running UI (``$LITRAG_HOME/ui.json``) and ask through it,
since the embedded store admits one process at a time.
"""
