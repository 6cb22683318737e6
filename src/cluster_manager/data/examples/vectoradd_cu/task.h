// Interface between the harness (eval.cu) and a submission: C = A + B on float vectors.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

// Turns a CUDA error into an exception, so the harness reports it per test.
#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        cudaError_t err_ = (call);                                                            \
        if (err_ != cudaSuccess) {                                                            \
            throw std::runtime_error(std::string(#call) + " failed: " +                       \
                                     cudaGetErrorString(err_) + " (" + __FILE__ + ":" +        \
                                     std::to_string(__LINE__) + ")");                         \
        }                                                                                     \
    } while (0)

// An owning array of floats in device memory. Stream-ordered allocation: after the first
// call the pool makes allocating an output cheap, so it does not dominate the timings.
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) {
            CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), bytes(), 0));
        }
    }
    ~DeviceBuffer() {
        if (ptr_ != nullptr) {
            cudaFreeAsync(ptr_, 0);  // no throw from a destructor
        }
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept
        : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        std::swap(ptr_, other.ptr_);
        std::swap(count_, other.count_);
        return *this;
    }

    float* data() { return ptr_; }
    const float* data() const { return ptr_; }
    std::size_t size() const { return count_; }
    std::size_t bytes() const { return count_ * sizeof(float); }

  private:
    float* ptr_ = nullptr;
    std::size_t count_ = 0;
};

// Two device vectors of `size` floats each, owned by the harness.
struct input_t {
    DeviceBuffer a;
    DeviceBuffer b;
    int size = 0;
};

// A new device vector of `size` floats holding a + b.
using output_t = DeviceBuffer;

// Implemented by the submission. May launch any number of kernels on the default stream;
// the harness synchronises before it stops the clock.
output_t custom_kernel(const input_t& data);
