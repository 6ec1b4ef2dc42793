#pragma once
// The `timings_ms` object of every subcommand's --json summary: where the process wall time went,
// in milliseconds. Keys, where they apply:
//   startup   process start (fork) to the first line of main(): the dynamic loader mapping cubekit and its
//             shared libraries, static initialisers (see startup_ms() for how it is measured)
//   context   making the cubekit::Context (with the CUDA backend: the CUDA start-up)
//   read      reading the input(s)
//   <step>    the compute step(s) under the command's names: rcmg, edges, kmeans, quantize (demo), paint,
//             pca, zernike, reconstruct, convert, stats, score, target, detect, synth, train, predict,
//             watershed, segment, vote
//   upload, download  with the CUDA backend, the host <-> device copies of the input and the outputs,
//             taken out of the compute step they happened in (Context::transfer_totals)
//   write     writing the output files
//   total     the first line of main() to the moment the JSON is printed
// Every step but startup lies inside total; what no step names (parsing the flags, checking the
// arguments, the summary's statistics) is total minus the steps. The process wall time is startup +
// total + the exit after the JSON (freeing memory, static destructors; tests/cli_timings_test.cpp
// checks the sum against the measured wall time of every subcommand).
#include <nlohmann/json.hpp>

#include "cubekit/context.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <type_traits>

namespace cubekit::cli {

/// The first line of main() calls this: the end of `startup` and the start of `total`. A process
/// that runs several commands (batch's workers) marks each with process_start = false: no `startup`.
void mark_main_entry(bool process_start = true);

/// Milliseconds from process start to mark_main_entry(); nullopt where /proc does not tell (or
/// mark_main_entry() was not called). The kernel gives the start only in clock ticks
/// (/proc/self/stat field 22, sysconf(_SC_CLK_TCK) = 100 on Linux: 10 ms, rounded down), which bounds
/// the startup to one tick [entry − (s+1)·tick, entry − s·tick] on CLOCK_BOOTTIME; within that window
/// the value is the time the process ran or waited for a CPU before main() (CLOCK_THREAD_CPUTIME_ID +
/// the run-queue delay of /proc/self/schedstat, ns resolution), a lower bound on the true startup that
/// equals it when nothing slept before main() (files in the page cache, the usual case). So it is
/// exact to within 10 ms in the worst case (a cold start that waited for the disk) and to well
/// under 1 ms in the usual one.
std::optional<double> startup_ms();

/// Milliseconds from mark_main_entry() to now (from the first call when it was not called).
double since_main_ms();

/// The steps of one run. Each command fills one and hands it to emit_json, which adds startup and total.
class Timings {
public:
    /// Adds `ms` to step `key` (a step timed twice adds up).
    void add(const std::string& key, double ms);
    /// Adds every step of a timings_ms object a shared function returned (run_rcmg, run_quantize).
    void add(const nlohmann::json& steps);
    /// Runs f, adds its time to step `key` and returns what f returns.
    template <class F>
    decltype(auto) time(const std::string& key, F&& f) {
        const auto t0 = std::chrono::steady_clock::now();
        if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
            f();
            add(key, ms_since(t0));
        } else {
            auto result = f();
            add(key, ms_since(t0));
            return result;
        }
    }
    /// Moves the host <-> device copies made through `ctx` since `before` out of step `key` into the
    /// steps "upload" and "download" (the CUDA backend; nothing changes when no copy was made).
    void split_transfers(const Context& ctx, const TransferTotals& before, const std::string& key);
    /// The steps, "startup" (when known) and "total" (the first line of main() to now).
    nlohmann::json json() const;

private:
    static double ms_since(std::chrono::steady_clock::time_point t0);
    std::map<std::string, double> steps_;
};

}  // namespace cubekit::cli
