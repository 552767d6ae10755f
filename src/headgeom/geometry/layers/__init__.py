"""The layers of a chain the engine's structured passes run on, and the rules that find them in a
head's forward (:mod:`headgeom.geometry.layers.registry`).

Built on :mod:`headgeom.geometry.linalg` only; the engine is built on it.
"""
