// The worker processes of `cubekit batch` (batch_worker.hpp).
#include "batch_worker.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cubekit/error.hpp"
#include "timings.hpp"

extern char** environ;

namespace cubekit::cli {

SceneWorker::SceneWorker(std::filesystem::path exe, std::vector<std::string> env) : exe_(std::move(exe)), env_(std::move(env)) {}

SceneWorker::~SceneWorker() { stop(); }

void SceneWorker::start() {
    int in[2], out[2];  // close-on-exec: another thread's worker must not inherit this one's pipes
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        throw IoError(std::string("batch: cannot make a pipe for a worker: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<std::string> argv_text = {exe_.string(), "__batch-worker"};
    std::vector<char*> argv, envp;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int err = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    if (err != 0) {
        close(in[1]);
        close(out[0]);
        pid_ = -1;
        throw IoError("batch: cannot start " + exe_.string() + ": " + std::strerror(err));
    }
    to_worker_ = in[1];
    from_worker_ = fdopen(out[0], "r");
}

int SceneWorker::stop() {
    if (pid_ < 0) return 0;
    if (to_worker_ >= 0) close(to_worker_);
    if (from_worker_) std::fclose(from_worker_);
    to_worker_ = -1, from_worker_ = nullptr;
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int SceneWorker::run(const std::vector<std::string>& args, const std::filesystem::path& out, const std::filesystem::path& err) {
    if (pid_ < 0) start();
    const std::string request = nlohmann::json{{"args", args}, {"out", out.string()}, {"err", err.string()}}.dump() + "\n";
    bool sent = true;
    for (std::size_t at = 0; at < request.size() && sent;) {
        const ssize_t n = write(to_worker_, request.data() + at, request.size() - at);
        if (n > 0) at += std::size_t(n);
        else sent = n < 0 && errno == EINTR;  // EPIPE (SIGPIPE is ignored): the worker is gone
    }
    char line[32] = {};
    if (!sent || !std::fgets(line, sizeof line, from_worker_)) {  // the worker died with this scene
        const int code = stop();
        return code == 0 ? 1 : code;
    }
    const int code = std::atoi(line);
    if (code == 4) stop();  // a device failure may leave the worker's GPU context unusable
    return code;
}

namespace {

// Points fd `target` at `path` (created or truncated).
bool redirect(int target, const std::string& path) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool ok = dup2(fd, target) >= 0;
    close(fd);
    return ok;
}

}  // namespace

int serve_batch_worker(int (*run_cli)(int argc, char** argv)) {
    const int answers = fcntl(1, F_DUPFD_CLOEXEC, 3);  // the scenes' stdout goes to their files
    const int own_stderr = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (answers < 0 || own_stderr < 0) return 3;
    std::string line;
    while (std::getline(std::cin, line)) {
        const nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
        if (request.is_discarded() || !request.contains("args")) return 2;  // only batch writes here
        std::vector<std::string> args = {"cubekit"};
        for (const auto& a : request["args"]) args.push_back(a.get<std::string>());
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::cout.flush();
        int code = 3;
        if (redirect(1, request["out"].get<std::string>()) && redirect(2, request["err"].get<std::string>())) {
            mark_main_entry(/*process_start=*/false);
            code = run_cli(int(args.size()), argv.data());
        }
        std::cout.flush();
        std::cerr.flush();
        std::fflush(nullptr);
        dup2(own_stderr, 2);
        redirect(1, "/dev/null");
        const std::string answer = std::to_string(code) + "\n";
        if (write(answers, answer.data(), answer.size()) != ssize_t(answer.size())) return 3;
    }
    return 0;
}

}  // namespace cubekit::cli
