import torch
from task import input_t, output_t

BLOCK = 1024


def custom_kernel(data: input_t) -> output_t:
    # TODO: write your own copy kernel. It must return a NEW tensor with the same values as
    # `data` (same shape and dtype). This starter is correct but slow: it copies one block of
    # 1024 values at a time, a launch per block; one copy of the whole tensor is far faster.
    out = torch.empty_like(data)
    for start in range(0, data.numel(), BLOCK):
        out[start : start + BLOCK] = data[start : start + BLOCK]
    return out
