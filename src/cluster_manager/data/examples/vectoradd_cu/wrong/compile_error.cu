#include "task.h"

__global__ void add_kernel(const float* a, const float* b, float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

output_t custom_kernel(const input_t& data) {
    output_t out(data.size);
    // Type error: passes the buffer objects instead of their device pointers.
    add_kernel<<<(data.size + 255) / 256, 256>>>(data.a, data.b, out, data.size);
    return out;
}
