from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    # Shapes do not broadcast: raises inside custom_kernel.
    return a + b.reshape(-1)
