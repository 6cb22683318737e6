from typing import TypedDict, TypeVar

import torch

# (this rank's tensor, seed, world_size); the ints let the check rebuild every rank's input.
input_t = TypeVar("input_t", bound=tuple[torch.Tensor, int, int])
output_t = TypeVar("output_t", bound=torch.Tensor)


class TestSpec(TypedDict):
    world_size: int
    size: int
    seed: int
