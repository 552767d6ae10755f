"""A fresh process's first engine call pays no lazy import the structured path does not need.

The first ``torch.func`` vjp or grad of a process imports torch._dynamo, and ``torch.autograd.grad``
with ``grad_outputs`` (or ``torch.nn.utils.skip_init``) imports sympy: seconds before the first
block, more than the call itself at small N. A head found as a chain (walked or traced) with a
declared loss needs neither (ρ and the declaration's check by plain autograd, folded Linears built
directly): checked here in a fresh interpreter by which modules the call imported, not by timing.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROGRAM = """
import json, sys
import torch
import torch.nn.functional as F
from torch import nn
from headgeom.geometry import effective_hessian
from headgeom.objectives import analysis_loss

class OwnForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 6), nn.Linear(6, 6), nn.Linear(6, 5)
    def forward(self, x):
        return self.fc3(self.fc2(F.silu(self.fc1(x))))

torch.manual_seed(0)
head = {"sequential": lambda: nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Linear(6, 6), nn.Linear(6, 5)),
        "traced": OwnForward}[sys.argv[1]]().double()
z = torch.randn(3, 4, dtype=torch.float64)
before = {m for m in ("torch._dynamo", "sympy") if m in sys.modules}
eh = effective_hessian(head, analysis_loss("negative_cosine", torch.randn(3, 5, dtype=torch.float64)), z)
eh.blocks()
print(json.dumps({"before": sorted(before), "after": sorted(m for m in ("torch._dynamo", "sympy") if m in sys.modules),
                  "path": eh.block_path(), "discovered_by": eh.info()["discovered_by"]}))
"""


@pytest.mark.parametrize("how", ["sequential", "traced"])
def test_the_first_structured_call_imports_neither_dynamo_nor_sympy(how):
    done = subprocess.run([sys.executable, "-c", PROGRAM, how], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["before"] == [], "importing headgeom already loaded them: the check below would prove nothing"
    assert (out["path"], out["discovered_by"]) == ("sandwich+declared-curvature", how)
    assert out["after"] == [], f"the first call imported {out['after']}"
