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
#include <optional>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "auto_backend.hpp"
#include "timings.hpp"

namespace cubekit::cli {

struct CommonOptions {
    ContextOptions context;  // --backend, --device, --threads (declared in context.hpp)
    bool json = false;
    bool quiet = false;
    ReadOptions read;   // --var (declared in io.hpp); format stays Auto
    std::string bands;  // band list, "" = all
    WriteOptions write;  // --png-compression (add_output_flags; declared in io.hpp); format stays Auto
};

/// Adds --backend, --device, --threads, --json, --quiet, --var and --bands to a subcommand.
void add_common_flags(CLI::App& app, CommonOptions& common);

/// Adds the declared WriteOptions flags (--png-compression) to a subcommand that writes PNG files;
/// its writes pass common.write on.
void add_output_flags(CLI::App& app, CommonOptions& common);

/// The context the flags ask for; a progress bar on stderr when stderr is a terminal. Its errors
/// (DeviceError too: "context: device 7 is not available") spell the fields as flags (--device 7).
Context make_context(const CommonOptions& common, const std::string& task);

/// An input as read, and the band indices of the file it holds (all of them without --bands).
struct Input {
    Cube cube;
    std::vector<int> bands;
};

/// Reads IN (format from content and extension), applying --var and --bands.
Input read_input(const std::filesystem::path& path, const CommonOptions& common);

/// A secondary input named on the command line (a mask, labels, markers, a class map): FILE, or FILE:VAR
/// for variable VAR of a MATLAB file.
struct SecondaryInput {
    std::filesystem::path path;
    std::string var;  ///< "" = the file's only array
};

/// Where `spec` points: the whole text when a file of that name exists; else FILE:VAR when the part before
/// the last ':' is a regular file; else the whole text (whose read then reports it missing).
SecondaryInput split_secondary(const std::string& spec);

/// Reads the secondary input `spec` given with `flag` ("--mask", or "MASK" for a positional argument), every
/// error naming the flag (README, exit codes): what the system refused — a missing file, a permission — is
/// IoError "FLAG: <the reader's message, which names the file>" (exit 3); what the file holds — its format,
/// a MATLAB variable it lacks — is InvalidInput "FLAG SPEC: ..." (exit 2).
Cube read_secondary(const std::string& spec, const std::string& flag);

/// Throws InvalidInput "FLAG SPEC is WxHxB; expected WxHxB, the size of IN" unless `c` has the width,
/// height and bands of `want`.
void check_same_size(const Cube& c, const CubeShape& want, const std::string& flag, const std::string& spec);

/// What a command has after context_while_reading: the context, what `read()` returned, and auto's
/// decision ("backend_choice" in the --json summary; null when --backend or --device decided).
template <class T>
struct Prepared {
    Context ctx;
    T input;
    nlohmann::json backend_choice;
};

inline CubeShape shape_of(const Cube& cube) { return cube.shape(); }
inline CubeShape shape_of(const Input& in) { return in.cube.shape(); }

/// The CPU threads a CPU context of these flags would use (--threads, else OpenMP's default).
int cpu_threads(const CommonOptions& common);

/// The context for work whose size is known (its input read): with auto and no --device, the rule of
/// auto_backend.hpp on `work` (a CPU pick initialises no CUDA), else what the flags say. Timings get
/// "context". Returns the context and auto's backend_choice (null when the flags decided).
std::pair<Context, nlohmann::json> context_for_work(const CommonOptions& common, const std::string& task,
                                                    Timings& timings, const WorkEstimate& work);

/// The context and the input of a command. Timings get "read" and "context" (the context's creation,
/// or what is still waited for it after the read when it was made in another thread).
/// - --backend cpu, or --device N > 0: the context, then the read (the CUDA runtime's current device is
///   per thread, and the context would select device N in the other thread).
/// - --backend cuda or --device 0: the context is made while the file is read (the CUDA start-up,
///   ~0.19 s on the GPU machine, overlaps the read).
/// - auto: the rule of auto_backend.hpp, with `estimate(shape)` the command's WorkEstimate. When the
///   size of the file at `path` alone already picks the GPU, the context is made while it is read;
///   otherwise the file is read first, the rule applied to its shape, and a CPU pick initialises no CUDA.
/// When the read fails, its error is reported (after the context is made).
template <class Read, class Estimate>
auto context_while_reading(const CommonOptions& common, const std::string& task, Timings& timings,
                           const std::filesystem::path& path, Read&& read, Estimate&& estimate)
    -> Prepared<std::invoke_result_t<Read&>> {
    using T = std::invoke_result_t<Read&>;
    const auto sequential = [&](const CommonOptions& flags, nlohmann::json choice) -> Prepared<T> {
        Context ctx = timings.time("context", [&] { return make_context(flags, task); });
        return {std::move(ctx), timings.time("read", read), std::move(choice)};
    };
    const auto overlapped = [&](nlohmann::json choice) -> Prepared<T> {
        std::future<Context> pending = std::async(std::launch::async, [&] { return make_context(common, task); });
        T in = timings.time("read", read);
        Context ctx = timings.time("context", [&] { return pending.get(); });
        return {std::move(ctx), std::move(in), std::move(choice)};
    };
    if (common.context.backend == Backend::Cpu || common.context.device > 0) return sequential(common, nullptr);
    if (common.context.backend == Backend::Cuda || common.context.device == 0) return overlapped(nullptr);
    const int threads = cpu_threads(common);
    BackendChoice early = choose_backend(estimate(shape_lower_bound(path)), threads);
    if (early.backend == Backend::Cuda) {
        early.reason += " (decided from the file size before the read)";
        Prepared<T> p = overlapped(early.json());
        if (!p.ctx.is_cuda()) p.backend_choice["reason"] = early.reason + "; no usable CUDA device: the CPU runs it";
        return p;
    }
    T in = timings.time("read", read);
    auto [ctx, choice] = context_for_work(common, task, timings, estimate(shape_of(in)));
    return {std::move(ctx), std::move(in), std::move(choice)};
}

/// context_while_reading, unless `file` is open (a tiled run reads it by windows): then the context
/// alone, for the file's shape, and an empty input.
template <class Read, class Estimate>
auto context_for_input(const CommonOptions& common, const std::string& task, Timings& timings,
                       const std::filesystem::path& path, const std::optional<CubeFile>& file, Read&& read,
                       Estimate&& estimate) -> Prepared<std::invoke_result_t<Read&>> {
    using T = std::invoke_result_t<Read&>;
    if (!file) return context_while_reading(common, task, timings, path, std::forward<Read>(read), std::forward<Estimate>(estimate));
    auto [ctx, choice] = context_for_work(common, task, timings, estimate(file->shape()));
    return {std::move(ctx), T{}, std::move(choice)};
}

/// A human-readable line on stderr (suppressed by --quiet).
void say(const CommonOptions& common, const std::string& line);

/// Says what the reader accepted with a warning (Metadata::warnings), one line each, unless --quiet.
void say_read_warnings(const CommonOptions& common, const Metadata& metadata);

/// The JSON skeleton every subcommand fills: command, cubekit version, backend, device, and auto's
/// backend_choice when it decided (context_while_reading).
nlohmann::json summary(const std::string& command, const Context& ctx, const nlohmann::json& backend_choice = nullptr);
/// Shape description for JSON: {width, height, bands, dtype, layout}.
nlohmann::json shape_json(const CubeShape& shape);

/// Milliseconds since `start`.
double elapsed_ms(std::chrono::steady_clock::time_point start);

/// With --json: sets j["timings_ms"] to `timings` (with startup, and total up to now) and prints the
/// summary as the only thing on stdout.
void emit_json(const CommonOptions& common, nlohmann::json& j, const Timings& timings);

}  // namespace cubekit::cli
