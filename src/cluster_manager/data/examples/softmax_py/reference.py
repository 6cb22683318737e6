import torch
from task import input_t, output_t
from utils import device, generator, make_match_reference


def generate_input(rows: int, cols: int, seed: int) -> input_t:
    dev = device()
    gen = generator(seed, dev)
    x = 3.0 * torch.randn(rows, cols, dtype=torch.float32, device=dev, generator=gen)
    # Per-row offsets in [-100, 100]: exp() of them overflows float32 without the max trick.
    offset = 200.0 * torch.rand(rows, 1, dtype=torch.float32, device=dev, generator=gen) - 100.0
    return x + offset


def ref_kernel(data: input_t) -> output_t:
    # float64 so the reference's own rounding is far below the tolerance.
    x = data.double()
    x = x - x.amax(dim=-1, keepdim=True)
    e = x.exp()
    return (e / e.sum(dim=-1, keepdim=True)).float()


check_implementation = make_match_reference(ref_kernel, rtol=1e-4, atol=1e-6)
