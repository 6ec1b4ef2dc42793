#include "cli_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "interrupt.hpp"
#include "option_flags.hpp"

namespace cubekit::cli {

void add_common_flags(CLI::App& app, CommonOptions& common) {
    bind_flags(app, common.context);  // --backend, --device, --threads
    app.add_flag("--json", common.json, "print one JSON object on stdout (and nothing else)");
    app.add_flag("-q,--quiet", common.quiet, "no progress bar or status lines on stderr");
    bind_flags(app, common.read);  // --var
    app.add_option("--bands", common.bands, "bands to use, 0-based, e.g. 0-9,20 (default: all)");
}

void add_output_flags(CLI::App& app, CommonOptions& common) {
    bind_flags(app, common.write);  // --png-compression
}

namespace {

// Draws "task [########        ]  45%" on stderr, at most ~20 times a second. Safe to call from
// any thread: one update at a time (whole lines, no torn output), and within one total the bar
// never goes back (a late, smaller `done` from another thread is ignored). A bar that reaches 100%
// ends its line at once, so that the status lines printed next start on a line of their own.
class ProgressBar {
public:
    explicit ProgressBar(std::string task) : task_(std::move(task)) {}
    ~ProgressBar() {
        if (open_) std::fputs("\n", stderr);
    }
    void update(std::size_t done, std::size_t total) {
        const std::lock_guard<std::mutex> lock(mutex_);
        if (total != total_) total_ = total, done_ = 0, finished_ = false;
        if (finished_ || done < done_) return;
        done_ = done = std::min(done, total);
        const auto now = std::chrono::steady_clock::now();
        if (total == 0 || (done < total && now - last_ < std::chrono::milliseconds(50))) return;
        if (!drawn_ && now - start_ < std::chrono::milliseconds(300) && done < total) return;  // short work: no bar
        last_ = now;
        drawn_ = true;
        const int width = 30, filled = int(width * done / total);
        std::fprintf(stderr, "\r%s [%s%s] %3d%%", task_.c_str(), std::string(filled, '#').c_str(),
                     std::string(width - filled, ' ').c_str(), int(100 * done / total));
        finished_ = done == total;
        open_ = !finished_;
        if (finished_) std::fputs("\n", stderr);
        std::fflush(stderr);
    }

private:
    std::string task_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
    bool drawn_ = false;
    std::mutex mutex_;
    std::size_t done_ = 0, total_ = 0;  // the furthest point reached for the current total
    bool finished_ = false, open_ = false;  // this total drawn at 100%; a line without its newline
};

}  // namespace

Context make_context(const CommonOptions& common, const std::string& task) {
    ContextOptions options = common.context;
    options.cancel = interrupt_flag();  // SIGINT/SIGTERM stop the work at its next check (interrupt.hpp)
    if (!common.quiet && isatty(STDERR_FILENO)) {
        auto bar = std::make_shared<ProgressBar>(task);
        options.progress = [bar](std::size_t done, std::size_t total) { bar->update(done, total); };
    }
    if (std::getenv("CUBEKIT_VERBOSE")) options.log = [](std::string_view m) { std::cerr << m << "\n"; };
    try {
        return Context(std::move(options));
    } catch (const DeviceError& e) {
        // main spells the fields of InvalidInput messages only; a missing device is a DeviceError.
        std::string said = with_flag_names(common.context, e.what());
        if (said == e.what()) throw;
        throw DeviceError(std::move(said));
    }
}

Input read_input(const std::filesystem::path& path, const CommonOptions& common) {
    Input in{.cube = read_cube(path, common.read), .bands = {}};
    say_read_warnings(common, in.cube.metadata());
    if (common.bands.empty()) {
        in.bands.resize(std::size_t(in.cube.bands()));
        for (int b = 0; b < in.cube.bands(); ++b) in.bands[std::size_t(b)] = b;
    } else {
        in.bands = parse_band_list(common.bands, in.cube.bands(), "bands");
        in.cube = in.cube.select_bands(in.bands);
    }
    return in;
}

SecondaryInput split_secondary(const std::string& spec) {
    const std::size_t colon = spec.rfind(':');
    if (!std::filesystem::exists(spec) && colon != std::string::npos && colon > 0 &&
        std::filesystem::is_regular_file(spec.substr(0, colon)))
        return {spec.substr(0, colon), spec.substr(colon + 1)};
    return {spec, ""};
}

Cube read_secondary(const std::string& spec, const std::string& flag) {
    const SecondaryInput in = split_secondary(spec);
    try {
        return read_cube(in.path, {.var = in.var});
    } catch (const IoError& e) {
        throw IoError(flag + ": " + e.what());
    } catch (const InvalidInput& e) {
        throw InvalidInput(flag + " " + spec + ": " + e.what());
    }
}

void check_same_size(const Cube& c, const CubeShape& want, const std::string& flag, const std::string& spec) {
    if (c.width() != want.width || c.height() != want.height || c.bands() != want.bands)
        throw InvalidInput(flag + " " + spec + " is " + std::to_string(c.width()) + "x" + std::to_string(c.height()) + "x" +
                           std::to_string(c.bands()) + "; expected " + std::to_string(want.width) + "x" +
                           std::to_string(want.height) + "x" + std::to_string(want.bands) + ", the size of IN");
}

void say(const CommonOptions& common, const std::string& line) {
    if (!common.quiet) std::cerr << line << "\n";
}

void say_read_warnings(const CommonOptions& common, const Metadata& metadata) {
    for (const std::string& w : metadata.warnings) say(common, "cubekit: warning: " + w);
}

nlohmann::json summary(const std::string& command, const Context& ctx, const nlohmann::json& backend_choice) {
    nlohmann::json j = {{"command", command},
                        {"cubekit_version", CUBEKIT_VERSION},
                        {"backend", std::string(ctx.backend_name())},
                        {"device", ctx.device_name()}};
    if (!backend_choice.is_null()) j["backend_choice"] = backend_choice;
    return j;
}

int cpu_threads(const CommonOptions& common) {
    return Context(ContextOptions{.backend = Backend::Cpu, .threads = common.context.threads}).threads();
}

std::pair<Context, nlohmann::json> context_for_work(const CommonOptions& common, const std::string& task,
                                                    Timings& timings, const WorkEstimate& work) {
    if (common.context.backend != Backend::Auto || common.context.device >= 0)
        return {timings.time("context", [&] { return make_context(common, task); }), nullptr};
    const BackendChoice choice = choose_backend(work, cpu_threads(common));
    CommonOptions flags = common;
    if (choice.backend == Backend::Cpu) flags.context.backend = Backend::Cpu;
    Context ctx = timings.time("context", [&] { return make_context(flags, task); });
    nlohmann::json j = choice.json();
    if (choice.backend == Backend::Cuda && !ctx.is_cuda())
        j["reason"] = choice.reason + "; no usable CUDA device: the CPU runs it";
    return {std::move(ctx), std::move(j)};
}

nlohmann::json shape_json(const CubeShape& s) {
    return {{"width", s.width}, {"height", s.height}, {"bands", s.bands},
            {"dtype", std::string(dtype_name(s.dtype))}, {"layout", std::string(layout_name(s.layout))}};
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void emit_json(const CommonOptions& common, nlohmann::json& j, const Timings& timings) {
    if (!common.json) return;
    j["timings_ms"] = timings.json();
    std::cout << j.dump(2) << std::endl;
}

}  // namespace cubekit::cli
