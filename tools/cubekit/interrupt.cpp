#include "interrupt.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "cubekit/io.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

namespace {

std::atomic<bool> g_flag{false};
std::atomic<int> g_signal{0};

struct RunOutputs {
    std::mutex mutex;
    std::map<std::string, int> paths;  // path → how many OutputLists list it
};
RunOutputs& run_outputs() {
    static RunOutputs* r = new RunOutputs;  // never destroyed: the watcher may use it until _exit
    return *r;
}

sigset_t watched_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    return set;
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal"; }

// Seconds the work has to stop by itself; CUBEKIT_INTERRUPT_GRACE overrides (tests use 0).
double grace_seconds() {
    if (const char* g = std::getenv("CUBEKIT_INTERRUPT_GRACE")) {
        char* end = nullptr;
        const double v = std::strtod(g, &end);
        if (end != g && v >= 0 && v < 3600) return v;
    }
    return 2.0;
}

[[noreturn]] void stop_now(int sig) {
    abandon_unfinished_writes();  // temporaries removed; a commit from now on fails
    RunOutputs& r = run_outputs();
    r.mutex.lock();  // kept: no output is listed or forgotten from here to _exit
    std::vector<std::string> listed;
    for (const auto& [path, count] : r.paths) listed.push_back(path);
    remove_outputs(listed);
    const std::string line = std::string("cubekit: interrupted by ") + signal_name(sig) + "; stopped (" +
                             std::to_string(listed.size()) + " unfinished output(s) removed)\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(130);
}

void watch() {
    const sigset_t set = watched_signals();
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    g_signal.store(sig);
    g_flag.store(true);
    // A second signal, or the end of the grace period, stops the process at once.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds());
    for (;;) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) break;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        const timespec wait{time_t(ns / 1000000000), long(ns % 1000000000)};
        siginfo_t info;
        if (sigtimedwait(&set, &info, &wait) > 0) break;
    }
    stop_now(sig);
}

}  // namespace

void install_interrupt_handling() {
    const sigset_t set = watched_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(watch).detach();
}

const std::atomic<bool>* interrupt_flag() { return &g_flag; }

bool interrupted() { return g_flag.load(); }

std::string interrupt_name() {
    const int sig = g_signal.load();
    return sig == 0 ? "" : signal_name(sig);
}

void register_run_output(const std::string& path) {
    const std::lock_guard lock(run_outputs().mutex);
    ++run_outputs().paths[path];
}

void forget_run_output(const std::string& path) {
    const std::lock_guard lock(run_outputs().mutex);
    auto& paths = run_outputs().paths;
    if (auto it = paths.find(path); it != paths.end() && --it->second == 0) paths.erase(it);
}

}  // namespace cubekit::cli
