import torch
import torch.distributed as dist
from task import input_t, output_t
from utils import generator, make_match_reference


def rank_device(rank: int) -> torch.device:
    if not torch.cuda.is_available():
        return torch.device("cpu")
    # Modulo: works whether the runner exposes all GPUs or one per process.
    return torch.device("cuda", rank % torch.cuda.device_count())


def _all_ranks(size: int, seed: int, world_size: int) -> torch.Tensor:
    # Every rank's input at once, drawn on the CPU: any process (on any GPU model) rebuilds
    # exactly the same values from the seed, which is what lets the check run without
    # communicating.
    gen = generator(seed, torch.device("cpu"))
    return torch.randn(world_size, size, dtype=torch.float32, generator=gen)


def generate_input(size: int, seed: int, world_size: int, rank: int) -> input_t:
    x = _all_ranks(size, seed, world_size)[rank].clone()
    return x.to(rank_device(rank)), seed, world_size


def ref_kernel(data: input_t) -> output_t:
    x, _, _ = data
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


def _expected_sum(data: input_t) -> output_t:
    x, seed, world_size = data
    return _all_ranks(x.numel(), seed, world_size).double().sum(dim=0).float()


check_implementation = make_match_reference(_expected_sum, rtol=1e-5, atol=1e-5)
