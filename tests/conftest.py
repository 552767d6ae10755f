"""Shared test settings: float64 references, few threads (CI has 2 cores)."""
import torch

torch.set_num_threads(2)
