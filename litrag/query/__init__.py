"""Query side of litrag: vector stores, sparse encoders, retrievers.

Kept import-light on purpose: ``from litrag.query.edge_store import QdrantEdgeVectorStore`` pulls in
the Qdrant engine only when a caller asks for it.
"""
