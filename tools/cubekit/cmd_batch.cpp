// cubekit batch: one subcommand over many scenes, dealt to every GPU named (issues 17, 20), in a
// worker process per slot (batch_worker.hpp). Each scene's --json summary is kept as its report; a
// scene whose output and report exist is skipped, so an interrupted batch resumes where it stopped.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "batch_worker.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "interrupt.hpp"
#include "cubekit/error.hpp"
#include "cubekit/tiles.hpp"

extern char** environ;

namespace cubekit::cli {

namespace fs = std::filesystem;

namespace {

// File extensions a folder is scanned for (an ENVI scene by its header).
const std::set<std::string> kSceneExtensions = {".hdr", ".npy", ".mat", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".pgm", ".ppm", ".pnm"};

struct Scene {
    fs::path input, output, report, log;
    std::string status = "pending", error;
    int exit_code = 0, device = -1;
    double seconds = 0;
};

std::vector<std::string> words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> w;
    for (std::string s; in >> s;) w.push_back(s);
    return w;
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// The scenes of the inputs: files as given, folders scanned (sorted) for the extensions above.
std::vector<fs::path> scene_files(const std::vector<std::string>& inputs) {
    std::vector<fs::path> files;
    for (const std::string& in : inputs) {
        std::error_code ec;
        if (fs::is_directory(in, ec)) {
            std::vector<fs::path> found;
            for (const auto& e : fs::directory_iterator(in, ec))
                if (e.is_regular_file() && kSceneExtensions.count(lower(e.path().extension().string()))) found.push_back(e.path());
            if (ec) throw IoError("batch: " + in + ": cannot list the folder: " + ec.message());
            std::sort(found.begin(), found.end());
            files.insert(files.end(), found.begin(), found.end());
        } else if (fs::is_regular_file(in, ec)) {
            files.emplace_back(in);
        } else {
            throw IoError("batch: " + in + ": no such file or folder");
        }
    }
    if (files.empty()) throw InvalidInput("batch: no scene found in the inputs (files with " +
                                          std::string(".hdr, .npy, .mat, .png, .jpg, .tif, .pgm, .ppm") + ")");
    return files;
}

// The environment of a scene's worker: ours, with CUDA_VISIBLE_DEVICES narrowed to `device` (an
// index into our own visible devices), so the worker starts the CUDA driver on its GPU alone.
std::vector<std::string> child_environment(int device) {
    std::vector<std::string> env;
    std::string visible;
    for (char** e = environ; *e; ++e) {
        const std::string_view v(*e);
        if (v.starts_with("CUDA_VISIBLE_DEVICES=")) visible = v.substr(21);
        else env.emplace_back(v);
    }
    if (device < 0) {
        if (!visible.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
        return env;
    }
    std::vector<std::string> ours;
    for (std::size_t at = 0; !visible.empty() && at <= visible.size();) {
        const std::size_t comma = std::min(visible.find(',', at), visible.size());
        ours.push_back(visible.substr(at, comma - at));
        at = comma + 1;
    }
    env.push_back("CUDA_VISIBLE_DEVICES=" + (std::size_t(device) < ours.size() ? ours[std::size_t(device)] : std::to_string(device)));
    return env;
}

std::string last_line(const fs::path& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    return last;
}

}  // namespace

Action add_batch(CLI::App& root) {
    struct Args {
        std::string command, out_dir, out_ext = ".npy", extra, devices;
        std::vector<std::string> inputs;
        int jobs = 1;
        bool json = false, quiet = false;
    };
    auto a = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand("batch", "Run one subcommand over many scenes, on every GPU, resumable");
    app->footer(
        "Each scene runs as `cubekit COMMAND SCENE OUT-DIR/<stem><out-ext> ARGS --json --quiet` in a worker process of\n"
        "its slot (--devices x --jobs slots; a worker starts the GPU driver once and runs its scenes one after another);\n"
        "its JSON summary is kept as OUT-DIR/<stem>.json (the report; stderr goes to <stem>.log, kept on failure).\n"
        "A scene whose output and report both exist is skipped: rerun the same command to resume.\n"
        "--devices deals the scenes to GPUs (each process sees its GPU alone: CUDA_VISIBLE_DEVICES), --jobs processes per\n"
        "device (or on the CPU); the processes share the cores (--threads CORES/PROCESSES each, unless --args names\n"
        "--threads).\n"
        "Exit code: 0 when every scene succeeded or was skipped, else the first failed scene's.\n"
        "From Python the same work is a loop over the cubekit functions, or cubekit.dask on a distributed cluster\n"
        "with one worker per GPU (no separate batch function).\n"
        "Examples:\n"
        "  cubekit batch rcmg scenes/ --out-dir gradients/ --devices all\n"
        "  cubekit batch 'detect rx' flights/*.hdr --out-dir rx/ --args '--window 5,21' --json");
    app->add_option("COMMAND", a->command, "the subcommand, e.g. rcmg or 'detect rx' (it must take IN OUT)")->required();
    app->add_option("INPUTS", a->inputs, "scene files or folders (scanned for .hdr .npy .mat .png .jpg .tif .pgm .ppm)")->required();
    app->add_option("--out-dir", a->out_dir, "folder of the outputs and reports (created)")->required();
    app->add_option("--out-ext", a->out_ext, "extension of each output: .npy (default), .hdr, .png, ...");
    app->add_option("--args", a->extra, "more flags for every scene, split at blanks (no quoting), e.g. '--connectivity 4'");
    app->add_option("--devices", a->devices, "CUDA devices to deal the scenes to: 0,1 or all (default: none named)");
    app->add_option("--jobs", a->jobs, "processes at once per device (or in all without --devices)")->check(CLI::Range(1, 256));
    app->add_flag("--json", a->json, "print one JSON object on stdout (and nothing else)");
    app->add_flag("-q,--quiet", a->quiet, "no progress lines on stderr");
    return [a] {
        const std::vector<std::string> command = words(a->command);
        if (command.empty() || command[0] == "batch") throw InvalidInput("batch: COMMAND = '" + a->command + "'; expected a subcommand such as rcmg");
        if (a->out_ext.empty() || a->out_ext[0] != '.') throw InvalidInput("batch: --out-ext = '" + a->out_ext + "'; expected an extension such as .npy");
        const std::vector<int> devices = a->devices.empty() ? std::vector<int>{} : parse_devices(a->devices, "--devices");
        const std::vector<fs::path> files = scene_files(a->inputs);
        std::error_code ec;
        fs::create_directories(a->out_dir, ec);
        if (ec) throw IoError("batch: --out-dir " + a->out_dir + ": cannot create: " + ec.message());
        std::vector<Scene> scenes;
        std::map<std::string, fs::path> stems;
        for (const fs::path& f : files) {
            const std::string stem = f.stem().string();
            if (auto [it, fresh] = stems.emplace(stem, f); !fresh)
                throw InvalidInput("batch: " + it->second.string() + " and " + f.string() + " would both write " + stem + a->out_ext);
            Scene s;
            s.input = f;
            s.output = fs::path(a->out_dir) / (stem + a->out_ext);
            s.report = fs::path(a->out_dir) / (stem + ".json");
            s.log = fs::path(a->out_dir) / (stem + ".log");
            if (fs::exists(s.output) && fs::exists(s.report)) s.status = "skipped";
            scenes.push_back(std::move(s));
        }
        const fs::path exe = fs::read_symlink("/proc/self/exe");
        const std::vector<std::string> extra = words(a->extra);
        const int workers = int(std::max<std::size_t>(devices.size(), 1)) * a->jobs;
        // The processes share the host's cores (each would start an OpenMP thread per core: 8 processes
        // on a 64-core host ran 512 threads), unless --args names a thread count.
        const bool threads_given = std::any_of(extra.begin(), extra.end(), [](const std::string& w) { return w.starts_with("--threads"); });
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        const std::string threads_each = std::to_string(std::max(1u, cores / unsigned(std::min(workers, int(cores)))));
        const std::size_t to_run = std::size_t(std::count_if(scenes.begin(), scenes.end(), [](const Scene& s) { return s.status != "skipped"; }));
        std::atomic<std::size_t> next{0}, done{0};
        std::mutex mutex;
        std::signal(SIGPIPE, SIG_IGN);  // a worker that died is seen as EPIPE, not as our death
        const auto work = [&](int w) {
            const int device = devices.empty() ? -1 : devices[std::size_t(w) % devices.size()];
            SceneWorker worker(exe, child_environment(device));
            for (std::size_t i; !interrupted() && (i = next.fetch_add(1)) < scenes.size();) {
                Scene& s = scenes[i];
                if (s.status == "skipped") continue;
                std::vector<std::string> argv = command;
                argv.push_back(s.input.string());
                argv.push_back(s.output.string());
                argv.insert(argv.end(), extra.begin(), extra.end());
                argv.insert(argv.end(), {"--json", "--quiet"});
                if (device >= 0) argv.insert(argv.end(), {"--device", "0"});  // its one visible GPU
                if (!threads_given && workers > 1) argv.insert(argv.end(), {"--threads", threads_each});
                const fs::path temp = s.report.parent_path() / ("." + s.report.filename().string() + ".tmp");
                const auto t0 = std::chrono::steady_clock::now();
                try {
                    s.exit_code = worker.run(argv, temp, s.log);
                } catch (const Error& e) {
                    s.exit_code = 3, s.error = e.what();
                }
                s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                s.device = device;
                if (s.exit_code == 0) {
                    fs::rename(temp, s.report, ec);  // the report last: its presence means the scene is complete
                    fs::remove(s.log, ec);
                    s.status = "ok";
                } else {
                    fs::remove(temp, ec);
                    s.status = "failed";
                    if (s.error.empty()) s.error = last_line(s.log);
                }
                const std::lock_guard lock(mutex);
                const std::size_t k = ++done;
                if (!a->quiet)
                    std::cerr << "batch [" << k << "/" << to_run << "] " << s.input.string() << ": " << s.status
                              << (s.status == "failed" ? " (exit " + std::to_string(s.exit_code) + "): " + s.error : "") << "\n";
            }
        };
        std::vector<std::thread> threads;
        for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);
        for (std::thread& t : threads) t.join();

        if (interrupted()) {  // the scenes done are kept (their reports mark them complete); a rerun resumes
            std::cerr << "cubekit: batch: interrupted by " << interrupt_name() << " after " << done.load() << " of " << to_run
                      << " scenes; run the same command again to resume\n";
            throw BatchFailed{130};
        }
        nlohmann::json j = {{"command", "batch"}, {"subcommand", a->command}, {"out_dir", a->out_dir}};
        int ok = 0, skipped = 0, failed = 0, first_failure = 0;
        for (const Scene& s : scenes) {
            ok += s.status == "ok", skipped += s.status == "skipped", failed += s.status == "failed";
            if (s.status == "failed" && first_failure == 0) first_failure = s.exit_code;
            nlohmann::json r = {{"input", s.input.string()}, {"output", s.output.string()}, {"report", s.report.string()},
                                {"status", s.status}, {"seconds", s.seconds}};
            if (s.device >= 0) r["device"] = s.device;
            if (s.status == "failed") r["exit_code"] = s.exit_code, r["error"] = s.error, r["log"] = s.log.string();
            j["scenes"].push_back(r);
        }
        j["ok"] = ok, j["skipped"] = skipped, j["failed"] = failed;
        if (a->json) std::cout << j.dump(2) << "\n";
        if (!a->quiet)
            std::cerr << "batch: " << ok << " done, " << skipped << " skipped (complete already), " << failed << " failed\n";
        if (first_failure != 0) throw BatchFailed{first_failure >= 2 && first_failure <= 4 ? first_failure : 1};
    };
}

}  // namespace cubekit::cli
