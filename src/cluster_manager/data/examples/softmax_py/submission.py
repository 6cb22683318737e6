import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # The fused library kernel reads the input once per row instead of once per step.
    return torch.softmax(data, dim=-1)
