from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # Forgets to communicate: returns only this rank's values.
    x, _seed, _world_size = data
    return x.clone()
