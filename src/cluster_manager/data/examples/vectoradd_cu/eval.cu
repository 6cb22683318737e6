// Popcorn harness for CUDA tasks: `./eval.out MODE TESTS_FILE`.
//
// Results are written as `key: value` lines to the file descriptor named by POPCORN_FD.
// MODE is `test` (check every case), `benchmark` (check once, then time) or `leaderboard`
// (time with fresh inputs and a check on every iteration). POPCORN_SEED, when set, is mixed
// into every case's seed so ranked inputs cannot be known in advance.

#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reference.cuh"
#include "task.h"

namespace {

constexpr int kExitTestFail = 112;
constexpr int kExitNoPipe = 111;
constexpr int kExitBadSpec = 113;

constexpr int kMinRuns = 3;
constexpr int kMaxRuns = 1000;
constexpr double kTargetRelErr = 0.001;
constexpr double kTimeBudgetSec = 10.0;  // per benchmark case
constexpr int kWarmupMaxRuns = 10;
constexpr double kWarmupSec = 0.2;
constexpr std::size_t kL2FlushBytes = 256u << 20;  // larger than any current L2

struct TestCase {
    std::string spec;  // the line as written, echoed back in the results
    std::map<std::string, std::string> args;
    std::uint64_t seed = 0;  // `seed` with the secret mixed in (ranked mode)

    std::int64_t get_int(const std::string& key) const {
        auto it = args.find(key);
        if (it == args.end()) {
            throw std::runtime_error("test case '" + spec + "' has no '" + key + "'");
        }
        char* end = nullptr;
        errno = 0;
        const long long value = std::strtoll(it->second.c_str(), &end, 10);
        if (end == it->second.c_str() || *end != '\0' || errno == ERANGE) {
            throw std::runtime_error("'" + key + "' in '" + spec + "' is not a 64-bit integer");
        }
        return value;
    }

    int get_size() const {
        const std::int64_t size = get_int("size");
        if (size < 0 || size > INT32_MAX) {
            throw std::runtime_error("size " + std::to_string(size) + " is out of range");
        }
        return static_cast<int>(size);
    }
};

class PopcornOutput {
  public:
    explicit PopcornOutput(FILE* file) : file_(file) {}
    ~PopcornOutput() { std::fclose(file_); }
    PopcornOutput(const PopcornOutput&) = delete;
    PopcornOutput& operator=(const PopcornOutput&) = delete;

    void log(const std::string& key, const std::string& value) {
        // One line per key: newlines inside a value are escaped, as the reader expects.
        std::string escaped;
        for (char c : value) {
            if (c == '\\') {
                escaped += "\\\\";
            } else if (c == '\n') {
                escaped += "\\n";
            } else {
                escaped += c;
            }
        }
        std::fprintf(file_, "%s: %s\n", key.c_str(), escaped.c_str());
        std::fflush(file_);  // earlier results survive a later crash
    }
    void log(const std::string& key, double value) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.3f", value);
        log(key, std::string(buf));
    }
    void log(const std::string& key, long long value) { log(key, std::to_string(value)); }

  private:
    FILE* file_;
};

std::string trim(const std::string& s) {
    const char* ws = " \t\r\n\f\v";
    const auto first = s.find_first_not_of(ws);
    if (first == std::string::npos) {
        return "";
    }
    return s.substr(first, s.find_last_not_of(ws) - first + 1);
}

bool all_chars(const std::string& s, bool (*pred)(char)) {
    return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}
bool is_key_char(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// Same grammar as the Python harnesses: `key: value` parts separated by ';', keys letters or
// '_', values a word or an optionally signed integer. Returns false on anything else.
bool parse_line(const std::string& line, TestCase& out) {
    out.spec = line;
    std::size_t start = 0;
    while (start <= line.size()) {
        std::size_t end = line.find(';', start);
        if (end == std::string::npos) {
            end = line.size();
        }
        const std::string part = trim(line.substr(start, end - start));
        const std::size_t colon = part.find(':');
        if (colon == std::string::npos) {
            return false;
        }
        const std::string key = part.substr(0, colon);
        const std::string value = trim(part.substr(colon + 1));
        const std::string digits =
            (!value.empty() && (value[0] == '+' || value[0] == '-')) ? value.substr(1) : value;
        if (!all_chars(key, is_key_char) ||
            !(all_chars(value, is_alpha) || all_chars(digits, is_digit))) {
            return false;
        }
        out.args[key] = value;
        start = end + 1;
    }
    return true;
}

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A keyed mix of the public case seed and the secret: nothing to invert, unlike a pairing.
// (This harness holds the secret in the submission's own process; the built-in Python
// harness keeps it out of reach and derives seeds with keyed BLAKE2b.)
std::uint64_t combine_seed(std::uint64_t seed, std::uint64_t secret) {
    return splitmix64(secret ^ splitmix64(seed ^ splitmix64(secret))) >> 1;
}

struct Stats {
    long long runs = 0;
    double mean = 0, std = 0, err = 0, best = 0, worst = 0;
};

Stats calculate_stats(const std::vector<double>& durations) {
    Stats st;
    st.runs = static_cast<long long>(durations.size());
    double sum = 0;
    for (double d : durations) {
        sum += d;
    }
    st.mean = sum / st.runs;
    double var = 0;
    for (double d : durations) {
        var += (d - st.mean) * (d - st.mean);
    }
    st.std = st.runs > 1 ? std::sqrt(var / (st.runs - 1)) : 0.0;
    st.err = st.std / std::sqrt(static_cast<double>(st.runs));
    st.best = *std::min_element(durations.begin(), durations.end());
    st.worst = *std::max_element(durations.begin(), durations.end());
    return st;
}

// Runs the submission once and surfaces launch and execution errors as exceptions.
output_t run_checked(const input_t& data) {
    output_t out = custom_kernel(data);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    return out;
}

std::string run_single_test(const TestCase& test) {
    const int size = test.get_size();
    const host_input_t host = generate_input(size, test.seed);
    const input_t data = to_device(host);
    const output_t out = run_checked(data);
    return check_implementation(host, out);
}

int run_testing(PopcornOutput& popcorn, const std::vector<TestCase>& tests) {
    popcorn.log("test-count", static_cast<long long>(tests.size()));
    bool passed = true;
    for (std::size_t i = 0; i < tests.size(); ++i) {
        const std::string prefix = "test." + std::to_string(i) + ".";
        popcorn.log(prefix + "spec", tests[i].spec);
        std::string error;
        bool crashed = false;  // an exception (CUDA error, bad case), not a wrong answer
        try {
            error = run_single_test(tests[i]);
        } catch (const std::exception& e) {
            error = e.what();
            crashed = true;
        } catch (...) {
            error = "unknown exception";
            crashed = true;
        }
        if (error.empty()) {
            popcorn.log(prefix + "status", "pass");
        } else {
            passed = false;
            popcorn.log(prefix + "status", "fail");
            popcorn.log(prefix + "error", error);
            if (crashed) popcorn.log(prefix + "verdict", "runtime_error");
        }
    }
    popcorn.log("check", passed ? "pass" : "fail");
    return passed ? 0 : kExitTestFail;
}

class Timer {
  public:
    Timer() {
        CUDA_CHECK(cudaEventCreate(&start_));
        CUDA_CHECK(cudaEventCreate(&stop_));
        CUDA_CHECK(cudaMalloc(&flush_, kL2FlushBytes));
    }
    ~Timer() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
        cudaFree(flush_);
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    // Times one call in nanoseconds, starting from a cold L2 so earlier calls do not help.
    double time_call(const input_t& data, output_t& out) {
        CUDA_CHECK(cudaMemset(flush_, 0, kL2FlushBytes));
        CUDA_CHECK(cudaEventRecord(start_));
        out = custom_kernel(data);
        CUDA_CHECK(cudaEventRecord(stop_));
        CUDA_CHECK(cudaEventSynchronize(stop_));
        CUDA_CHECK(cudaGetLastError());
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        return static_cast<double>(ms) * 1e6;
    }

  private:
    cudaEvent_t start_{};
    cudaEvent_t stop_{};
    void* flush_ = nullptr;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Returns an error message, or "" with `stats` filled in.
std::string run_single_benchmark(const TestCase& test, bool recheck, Timer& timer,
                                 Stats& stats) {
    const int size = test.get_size();
    const std::uint64_t seed = test.seed;
    host_input_t host = generate_input(size, seed);
    input_t data = to_device(host);

    // A wrong kernel is not timed at all.
    {
        const output_t out = run_checked(data);
        std::string error = check_implementation(host, out);
        if (!error.empty()) {
            return error;
        }
    }

    const auto warm_start = std::chrono::steady_clock::now();
    for (int i = 0; i < kWarmupMaxRuns && seconds_since(warm_start) < kWarmupSec; ++i) {
        run_checked(data);
    }

    std::vector<double> durations;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kMaxRuns; ++i) {
        if (recheck) {
            // Fresh inputs every iteration: results cannot be cached across calls.
            host = generate_input(size, seed + 13 * static_cast<std::uint64_t>(i + 1));
            data = to_device(host);
        }
        output_t out;
        durations.push_back(timer.time_call(data, out));
        if (recheck) {
            std::string error = check_implementation(host, out);
            if (!error.empty()) {
                return "iteration " + std::to_string(i) + ": " + error;
            }
        }
        if (static_cast<int>(durations.size()) >= kMinRuns) {
            const Stats current = calculate_stats(durations);
            if (current.err / current.mean < kTargetRelErr ||
                seconds_since(start) > kTimeBudgetSec) {
                break;
            }
        }
    }
    stats = calculate_stats(durations);
    return "";
}

int run_benchmarking(PopcornOutput& popcorn, const std::vector<TestCase>& tests, bool recheck) {
    popcorn.log("benchmark-count", static_cast<long long>(tests.size()));
    bool passed = true;
    std::unique_ptr<Timer> timer;
    std::string setup_error;
    try {
        timer = std::make_unique<Timer>();
    } catch (const std::exception& e) {
        setup_error = e.what();
    }
    for (std::size_t i = 0; i < tests.size(); ++i) {
        const std::string prefix = "benchmark." + std::to_string(i) + ".";
        popcorn.log(prefix + "spec", tests[i].spec);
        Stats stats;
        std::string error = setup_error;
        bool crashed = !setup_error.empty();
        if (error.empty()) {
            try {
                error = run_single_benchmark(tests[i], recheck, *timer, stats);
            } catch (const std::exception& e) {
                error = e.what();
                crashed = true;
            } catch (...) {
                error = "unknown exception";
                crashed = true;
            }
        }
        if (!error.empty()) {
            passed = false;
            popcorn.log(prefix + "status", "fail");
            popcorn.log(prefix + "error", error);
            if (crashed) popcorn.log(prefix + "verdict", "runtime_error");
            continue;
        }
        popcorn.log(prefix + "runs", stats.runs);
        popcorn.log(prefix + "mean", stats.mean);
        popcorn.log(prefix + "std", stats.std);
        popcorn.log(prefix + "err", stats.err);
        popcorn.log(prefix + "best", stats.best);
        popcorn.log(prefix + "worst", stats.worst);
    }
    popcorn.log("check", passed ? "pass" : "fail");
    return passed ? 0 : kExitTestFail;
}

}  // namespace

int main(int argc, char** argv) {
    const char* fd_env = std::getenv("POPCORN_FD");
    if (fd_env == nullptr || *fd_env == '\0') {
        std::fprintf(stderr, "POPCORN_FD is not set\n");
        return kExitNoPipe;
    }
    FILE* pipe = fdopen(std::atoi(fd_env), "w");
    if (pipe == nullptr) {
        std::perror("fdopen(POPCORN_FD)");
        return kExitNoPipe;
    }
    const char* seed_env = std::getenv("POPCORN_SEED");
    const bool has_secret = seed_env != nullptr && *seed_env != '\0';
    const std::uint64_t secret = has_secret ? std::strtoull(seed_env, nullptr, 10) : 0;
    // The submission runs in this process: it must not see the secret seed.
    unsetenv("POPCORN_FD");
    unsetenv("POPCORN_SEED");

    PopcornOutput popcorn(pipe);
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s MODE TESTS_FILE\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1];

    std::ifstream file(argv[2]);
    if (!file) {
        std::fprintf(stderr, "cannot open tests file %s\n", argv[2]);
        return kExitBadSpec;
    }
    std::vector<TestCase> tests;
    std::string line;
    while (std::getline(file, line)) {
        if (trim(line).empty()) {
            continue;
        }
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        TestCase test;
        if (!parse_line(line, test)) {
            std::fprintf(stderr, "invalid test case: '%s'\n", line.c_str());
            return kExitBadSpec;
        }
        try {
            test.seed = static_cast<std::uint64_t>(test.get_int("seed"));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s\n", e.what());
            return kExitBadSpec;
        }
        if (has_secret) {
            test.seed = combine_seed(test.seed, secret);
        }
        tests.push_back(std::move(test));
    }

    if (mode == "test") {
        return run_testing(popcorn, tests);
    }
    if (mode == "benchmark" || mode == "leaderboard") {
        return run_benchmarking(popcorn, tests, mode == "leaderboard");
    }
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    return 2;
}
