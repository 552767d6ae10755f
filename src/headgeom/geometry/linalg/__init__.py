"""The linear algebra of the geometry: matrix-free symmetric operators, Lanczos, spectra with their
sign floor, the collapse threshold on the ray G + tM, the paper's shifted power iteration and the
symmetric per-sample products (weighted Grams) the structured passes are built from.

Imports nothing else of headgeom.geometry: the layers and the engine are built on it.
"""
