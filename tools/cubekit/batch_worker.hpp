#pragma once
// The processes `cubekit batch` runs its scenes in. A scene in a fresh process pays for starting the
// CUDA driver (0.3 s on the H100 machines, and the driver serialises it between processes: 1.75 s a
// scene with 8 processes starting at once on 4 GPUs, bench/results 2026-11-26), so each of batch's
// slots keeps one worker process (`cubekit __batch-worker`, not a user command) that runs its scenes
// one after another with the same command-line code, its stdout and stderr sent to each scene's files.
// A worker that dies (a crash, a signal) fails its scene only: the next scene starts a new worker, as
// does a scene that ended in a device failure (exit 4: the GPU context may be unusable).
#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace cubekit::cli {

class SceneWorker {
public:
    /// `exe`: this program; `env`: the worker's environment (e.g. its CUDA_VISIBLE_DEVICES).
    SceneWorker(std::filesystem::path exe, std::vector<std::string> env);
    ~SceneWorker();
    SceneWorker(const SceneWorker&) = delete;
    SceneWorker& operator=(const SceneWorker&) = delete;

    /// Runs `cubekit ARGS` in the worker, stdout to `out`, stderr to `err`; returns its exit code
    /// (128 + signal when the worker died). Throws IoError when no worker can be started.
    int run(const std::vector<std::string>& args, const std::filesystem::path& out, const std::filesystem::path& err);

private:
    void start();
    int stop();  // closes the worker's input and waits: its exit status as an exit code
    std::filesystem::path exe_;
    std::vector<std::string> env_;
    pid_t pid_ = -1;
    int to_worker_ = -1;
    std::FILE* from_worker_ = nullptr;
};

/// The worker's side (main() calls it for `cubekit __batch-worker`): reads one JSON request a line
/// from stdin ({"args": [...], "out": path, "err": path}), runs `run_cli` on it with fds 1 and 2 on
/// those files, and answers the exit code on a line of its original stdout.
int serve_batch_worker(int (*run_cli)(int argc, char** argv));

}  // namespace cubekit::cli
