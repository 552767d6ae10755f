"""Shared test settings: float64 references, few threads (CI has 2 cores)."""
import pytest
import torch

from headgeom.threads import torch_threads

torch.set_num_threads(2)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of many tiny problems (on 2 shared cores thread hand-offs
    cost more than the ops); opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    with torch_threads(1):
        yield
