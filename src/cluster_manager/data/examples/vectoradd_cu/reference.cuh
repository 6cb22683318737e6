// Input generation, reference result and correctness check, all on the host so a broken
// submission cannot corrupt what it is compared against.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "task.h"

struct host_input_t {
    std::vector<float> a;
    std::vector<float> b;
};

// splitmix64: tiny, portable and identical on every compiler, unlike <random>'s distributions.
inline std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Uniform in [-1, 1) from the top 24 bits (exactly representable as float).
inline float uniform_pm1(std::uint64_t& state) {
    return static_cast<float>(splitmix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

inline host_input_t generate_input(int size, std::uint64_t seed) {
    host_input_t host;
    host.a.resize(size);
    host.b.resize(size);
    std::uint64_t state = seed;
    for (int i = 0; i < size; ++i) {
        host.a[i] = uniform_pm1(state);
        host.b[i] = uniform_pm1(state);
    }
    return host;
}

inline input_t to_device(const host_input_t& host) {
    input_t data;
    data.size = static_cast<int>(host.a.size());
    data.a = DeviceBuffer(host.a.size());
    data.b = DeviceBuffer(host.b.size());
    CUDA_CHECK(cudaMemcpy(data.a.data(), host.a.data(), data.a.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(data.b.data(), host.b.data(), data.b.bytes(), cudaMemcpyHostToDevice));
    return data;
}

inline std::vector<float> ref_kernel(const host_input_t& host) {
    std::vector<float> out(host.a.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = host.a[i] + host.b[i];
    }
    return out;
}

// Empty string when `out` matches the reference, else a readable description.
inline std::string check_implementation(const host_input_t& host, const output_t& out) {
    const std::vector<float> expected = ref_kernel(host);
    if (out.size() != expected.size()) {
        return "size mismatch: got " + std::to_string(out.size()) + " elements, expected " +
               std::to_string(expected.size());
    }
    std::vector<float> got(out.size());
    if (!got.empty()) {
        CUDA_CHECK(cudaMemcpy(got.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));
    }
    constexpr float kAtol = 1e-6f;
    constexpr float kRtol = 1e-6f;
    std::size_t bad = 0;
    std::string detail;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const float diff = std::fabs(got[i] - expected[i]);
        // `!(diff <= tol)` also catches NaN.
        if (!(diff <= kAtol + kRtol * std::fabs(expected[i]))) {
            if (bad < 5) {
                char line[128];
                std::snprintf(line, sizeof(line), "\n  at [%zu]: got %.7g, expected %.7g", i,
                              got[i], expected[i]);
                detail += line;
            }
            ++bad;
        }
    }
    if (bad == 0) {
        return "";
    }
    return std::to_string(bad) + " of " + std::to_string(got.size()) + " elements differ" +
           detail;
}
