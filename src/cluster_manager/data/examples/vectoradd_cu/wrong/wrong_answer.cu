#include "task.h"

// Off-by-one in the bounds check: the last element is never written.
__global__ void add_kernel(const float* a, const float* b, float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) {
        c[i] = a[i] + b[i];
    }
}

output_t custom_kernel(const input_t& data) {
    output_t out(data.size);
    if (data.size > 0) {
        // Zeroed so the missing element reads as 0 rather than leftover memory.
        CUDA_CHECK(cudaMemset(out.data(), 0, out.bytes()));
        const int threads = 256;
        const int blocks = (data.size + threads - 1) / threads;
        add_kernel<<<blocks, threads>>>(data.a.data(), data.b.data(), out.data(), data.size);
        CUDA_CHECK(cudaGetLastError());
    }
    return out;
}
