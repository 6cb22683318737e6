import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # TODO: implement your own all-reduce (e.g. ring or tree over dist.send/recv, or symmetric
    # memory). `x` is this rank's tensor; return a NEW tensor with the sum over all ranks.
    x, _seed, _world_size = data
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out
