"""Semantic recall: embedding providers, the pure ranking of a user's notes for a turn, and deduplication.

Importing this package is cheap (no model, no numpy work); see ``embedders`` and ``ranking``.
"""
