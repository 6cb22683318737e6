from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # TODO: replace with your own kernel (Triton, CUDA via load_inline, ...).
    # `data` is (A, B), two float16 tensors of shape (size, size); return A + B as a new tensor.
    # This starter is correct but slow: it adds in float32 and converts back, three passes
    # over the data and two temporaries where one float16 pass would do.
    a, b = data
    return (a.float() + b.float()).half()
