"""Test-wide setup: without a GPU, kernels run under Triton's interpreter on the CPU.

TRITON_INTERPRET must be set before any @triton.jit function is defined (Triton reads it when
it decorates), so this runs before the test modules import `kernels`.
"""

import os

import pytest
import torch

ON_GPU = torch.cuda.is_available()


if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"
    from kernels.interpreter import prepare

    # What every launcher applies at its first interpreted launch (kernels.interpreter), applied up
    # front: tests that call a @triton.jit kernel without a launcher get it too.
    prepare()


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cuda" if ON_GPU else "cpu")


# The PostgreSQL server fixtures (pg_admin_url, pg_admin, pg_target) for tests/db and tests/dashboard.
pytest_plugins = ["pgserver"]
