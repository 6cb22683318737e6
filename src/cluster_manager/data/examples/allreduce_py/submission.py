import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, _seed, _world_size = data
    # Reduce in place on our own copy: one collective, no extra buffers.
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out
