from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # Off-by-one: drops the last element.
    return data[:-1].clone()
