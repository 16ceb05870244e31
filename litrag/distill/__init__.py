"""Distilling LitSeg into a LitSeg-Lite student: teacher data, rewards, SFT, GRPO, export.

``litrag.distill.rewards`` and ``litrag.distill.judge`` need only the base install; training
and export (``litrag.distill.train``, ``litrag.distill.export``) need the ``distill`` extra
(trl, peft, datasets, accelerate, torch), imported inside their functions.
"""
