from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    # Indexing bug: reads B transposed.
    return a + b.t()
