// Concurrency and determinism (issue 18, items 5 and 7): every family, run from 8 threads x 50
// calls (each thread with its own Context, or one Context shared), gives the result of a serial run;
// and every output is identical run to run and across thread counts. Results are compared through
// a digest of every output byte (FNV-1a), against the serial run of the same build, never against
// stored values.
#include <atomic>
#include <mutex>
#include <thread>

#include "stress_testing.hpp"

using namespace cubekit;
using namespace cubekit::testing::stress;

namespace {

Context cpu(int threads) { return Context(ContextOptions{.backend = Backend::Cpu, .threads = threads}); }

// The serial digests: one thread.
const std::vector<std::uint64_t>& serial() {
    static const std::vector<std::uint64_t> d = [] {
        const Context one = cpu(1);
        std::vector<std::uint64_t> out;
        for (const Family& f : families()) out.push_back(f.run(one));
        return out;
    }();
    return d;
}

}  // namespace

// Item 7: run to run and across thread counts.
TEST(Determinism, EveryFamilyIsIdenticalRunToRunAndAcrossThreadCounts) {
    const std::vector<Family> fams = families();
    for (int threads : {1, 2, 3, 0}) {
        const Context ctx = cpu(threads);
        for (std::size_t i = 0; i < fams.size(); ++i)
            for (int run = 0; run < 2; ++run)
                EXPECT_EQ(fams[i].run(ctx), serial()[i]) << fams[i].name << ", " << threads << " thread(s), run " << run;
    }
}

// Item 5: 8 threads x 50 calls, each thread cycling through the families; half of the threads own
// their Context, half share one. Every result equals the serial one.
TEST(Concurrency, EightThreadsOfFiftyCallsGiveTheSerialResults) {
    const std::vector<Family> fams = families();
    const std::vector<std::uint64_t>& want = serial();
    const Context shared = cpu(1);
    std::atomic<int> calls{0}, wrong{0};
    std::mutex mutex;
    std::vector<std::string> failures;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            const Context own = cpu(1);
            const Context& ctx = t % 2 == 0 ? own : shared;
            for (int k = 0; k < 50; ++k) {
                const std::size_t i = std::size_t(t + k) % fams.size();
                std::uint64_t got = 0;
                try {
                    got = fams[i].run(ctx);
                } catch (const std::exception& e) {
                    const std::lock_guard lock(mutex);
                    failures.push_back(fams[i].name + ": " + e.what());
                }
                ++calls;
                if (got != want[i]) {
                    ++wrong;
                    const std::lock_guard lock(mutex);
                    failures.push_back(fams[i].name + " in thread " + std::to_string(t) + ", call " + std::to_string(k));
                }
            }
        });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(calls.load(), 400);
    EXPECT_EQ(wrong.load(), 0) << (failures.empty() ? "" : failures.front());
}
