"""The vector stores: Qdrant Edge in-process (and its parts), locked for many threads,
a Qdrant server or cluster, the choice between them, and export from one to the other.

Kept import-light: ``from litrag.stores.edge_store import QdrantEdgeVectorStore`` pulls in
the Qdrant engine only when a caller asks for it.
"""
