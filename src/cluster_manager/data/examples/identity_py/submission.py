import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # One allocation plus one contiguous copy; no autograd or layout bookkeeping.
    out = torch.empty_like(data, memory_format=torch.contiguous_format)
    out.copy_(data)
    return out
