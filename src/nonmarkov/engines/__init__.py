"""Engines: one implementation per backend of the window and chain interfaces (:mod:`.base`)."""
