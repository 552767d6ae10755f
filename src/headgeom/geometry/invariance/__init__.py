"""The invariance side of the geometry (docs/paper.md §2, C6 and C7): augmentation tangents and
Rayleigh quotients, the head's pullback metric J_hᵀJ_h, Fisher information and numerical ranks.
"""
