"""Retrieval: the book retriever (blocks ranked through their paragraph children) and the
evidence each hit carries.
"""
