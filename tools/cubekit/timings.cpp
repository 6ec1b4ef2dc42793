#include "timings.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace cubekit::cli {

namespace {

/// The moment main() began, on the clocks the timings need.
struct MainEntry {
    std::chrono::steady_clock::time_point steady;  ///< `total` starts here
    double boottime_ms = -1;  ///< CLOCK_BOOTTIME, the clock of /proc/self/stat's starttime; < 0 unknown
    double ran_ms = -1;       ///< CPU time + run-queue delay of this thread so far; < 0 unknown
    bool process_start = true;  ///< false: a command run by a long-lived process (no startup to report)
};

MainEntry& entry() {
    static MainEntry e{.steady = std::chrono::steady_clock::now()};  // first use, when main() did not mark
    return e;
}

double clock_ms(clockid_t clock) {
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) return -1;
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

/// The run-queue delay of this thread in ms (/proc/self/schedstat: run ns, wait ns, slices); 0 unknown.
double runqueue_delay_ms() {
    std::FILE* f = std::fopen("/proc/self/schedstat", "r");
    if (!f) return 0;
    unsigned long long run = 0, wait = 0;
    const int got = std::fscanf(f, "%llu %llu", &run, &wait);
    std::fclose(f);
    return got == 2 ? double(wait) * 1e-6 : 0;
}

/// The process start in clock ticks since boot (/proc/self/stat field 22); < 0 unknown.
long long start_ticks() {
    std::ifstream in("/proc/self/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t close = stat.rfind(')');  // field 2, the command name, may hold spaces and ')'
    if (close == std::string::npos) return -1;
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    for (int i = 3; i <= 22; ++i)
        if (!(fields >> field)) return -1;
    try {
        return std::stoll(field);
    } catch (const std::exception&) {
        return -1;
    }
}

}  // namespace

void mark_main_entry(bool process_start) {
    MainEntry& e = entry();
    e.process_start = process_start;
    // The lower bound first (a bound read a little early is still a bound), the steady mark last, so
    // that these reads (tens of microseconds) fall inside neither startup nor total.
    const double cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    e.ran_ms = cpu < 0 ? -1 : cpu + runqueue_delay_ms();
    e.boottime_ms = clock_ms(CLOCK_BOOTTIME);
    e.steady = std::chrono::steady_clock::now();
}

std::optional<double> startup_ms() {
    const MainEntry& e = entry();
    const long long start = start_ticks();
    const long tick_hz = sysconf(_SC_CLK_TCK);
    if (!e.process_start || e.boottime_ms < 0 || start < 0 || tick_hz <= 0) return std::nullopt;
    const double tick_ms = 1e3 / double(tick_hz);
    // starttime is rounded down to a tick: the process began in [start, start + 1) ticks.
    const double hi = std::max(0.0, e.boottime_ms - double(start) * tick_ms);
    const double lo = std::max(0.0, hi - tick_ms);
    return e.ran_ms < 0 ? (lo + hi) / 2 : std::clamp(e.ran_ms, lo, hi);
}

double since_main_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - entry().steady).count();
}

void Timings::add(const std::string& key, double ms) { steps_[key] += ms; }

void Timings::add(const nlohmann::json& steps) {
    for (auto it = steps.begin(); it != steps.end(); ++it) add(it.key(), it.value().get<double>());
}

void Timings::split_transfers(const Context& ctx, const TransferTotals& before, const std::string& key) {
    const TransferTotals after = ctx.transfer_totals();
    const double up = after.upload_ms - before.upload_ms, down = after.download_ms - before.download_ms;
    if (up <= 0 && down <= 0) return;
    if (up > 0) add("upload", up);
    if (down > 0) add("download", down);
    steps_[key] -= up + down;
}

nlohmann::json Timings::json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [key, ms] : steps_) j[key] = ms;
    if (const std::optional<double> s = startup_ms()) j["startup"] = *s;
    j["total"] = since_main_ms();
    return j;
}

double Timings::ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace cubekit::cli
