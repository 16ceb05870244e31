"""The answer path: what a question is, what the model reads, the engine, the checks on a
draft, what an answer is.
"""
