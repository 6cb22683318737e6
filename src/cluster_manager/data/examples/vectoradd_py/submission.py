import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    # Write straight into a preallocated result: one fused elementwise pass, no temporaries.
    out = torch.empty_like(a)
    torch.add(a, b, out=out)
    return out
