"""The timing row's task: a bf16 matrix product on the GPU."""

import torch


def generate_input(size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed % 2**63)
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    return a, b


def ref_kernel(data: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    a, b = data
    return a @ b


def check_implementation(data: tuple[torch.Tensor, torch.Tensor], output: object) -> str:
    expected = ref_kernel(data).float()
    if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
        return "output is not a tensor of the product's shape"
    error = (output.to(expected.device).float() - expected).abs().max().item()
    scale = expected.abs().max().item()
    if error > 1e-2 * scale:
        return f"largest error {error:.3g} is over 1 % of the largest value {scale:.3g}"
    return ""
