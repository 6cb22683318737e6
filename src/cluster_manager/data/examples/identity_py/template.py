from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # TODO: write your own copy kernel. It must return a NEW tensor with the same values as
    # `data` (same shape and dtype); this starter simply clones it.
    return data.clone()
