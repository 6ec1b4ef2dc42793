#pragma once
// Pieces every subcommand shares: the common flags, the context with its progress bar, reading
// the input (with --var and --bands), the JSON summary and the human-readable lines.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "timings.hpp"

namespace cubekit::cli {

struct CommonOptions {
    ContextOptions context;  // --backend, --device, --threads (declared in context.hpp)
    bool json = false;
    bool quiet = false;
    std::string var;    // MATLAB variable
    std::string bands;  // band list, "" = all
    WriteOptions write;  // --png-compression (add_output_flags; declared in io.hpp); format stays Auto
};

/// Adds --backend, --device, --threads, --json, --quiet, --var and --bands to a subcommand.
void add_common_flags(CLI::App& app, CommonOptions& common);

/// Adds the declared WriteOptions flags (--png-compression) to a subcommand that writes PNG files;
/// its writes pass common.write on.
void add_output_flags(CLI::App& app, CommonOptions& common);

/// The context the flags ask for; a progress bar on stderr when stderr is a terminal.
Context make_context(const CommonOptions& common, const std::string& task);

/// An input as read, and the band indices of the file it holds (all of them without --bands).
struct Input {
    Cube cube;
    std::vector<int> bands;
};

/// Reads IN (format from content and extension), applying --var and --bands.
Input read_input(const std::filesystem::path& path, const CommonOptions& common);

/// make_context while `read()` runs: the CUDA start-up (~0.4 s on the GPU machine) overlaps the
/// file read. Timings get "read" and "context" = what is still waited for the context after the
/// read (0 when it is ready by then). Sequential for the CPU backend and for an explicit device
/// other than 0 (the CUDA runtime's current device is per thread, and the context would select it
/// in the other thread). When the read fails, its error is reported (after the context is made).
template <class Read>
std::pair<Context, std::invoke_result_t<Read&>> context_while_reading(const CommonOptions& common,
                                                                      const std::string& task, Timings& timings,
                                                                      Read&& read) {
    if (common.context.backend == Backend::Cpu || common.context.device > 0) {
        Context ctx = timings.time("context", [&] { return make_context(common, task); });
        auto in = timings.time("read", read);
        return {std::move(ctx), std::move(in)};
    }
    std::future<Context> pending = std::async(std::launch::async, [&] { return make_context(common, task); });
    auto in = timings.time("read", read);
    Context ctx = timings.time("context", [&] { return pending.get(); });
    return {std::move(ctx), std::move(in)};
}

/// A human-readable line on stderr (suppressed by --quiet).
void say(const CommonOptions& common, const std::string& line);

/// The JSON skeleton every subcommand fills: command, cubekit version, backend, device.
nlohmann::json summary(const std::string& command, const Context& ctx);
/// Shape description for JSON: {width, height, bands, dtype, layout}.
nlohmann::json shape_json(const CubeShape& shape);

/// Milliseconds since `start`.
double elapsed_ms(std::chrono::steady_clock::time_point start);

/// With --json: sets j["timings_ms"] to `timings` (with startup, and total up to now) and prints the
/// summary as the only thing on stdout.
void emit_json(const CommonOptions& common, nlohmann::json& j, const Timings& timings);

}  // namespace cubekit::cli
