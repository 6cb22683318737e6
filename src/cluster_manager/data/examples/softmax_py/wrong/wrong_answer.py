from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # Two bugs: no max subtraction (overflows to inf/nan) and normalised over columns.
    e = data.exp()
    return e / e.sum(dim=0, keepdim=True)
