// Concurrency and determinism (issue 18, items 5 and 7): every family, run from 8 threads x 50
// calls (each thread with its own Context, or one Context shared), gives the result of a serial run;
// and every output is identical run to run and across thread counts. Results are compared through
// a digest of every output byte (FNV-1a), against the serial run of the same build, never against
// stored values.

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
    const Context shared = cpu(1);
    const std::vector<std::string> failures = run_concurrently(families(), serial(), shared, [] { return cpu(1); });
    EXPECT_TRUE(failures.empty()) << failures.size() << " failure(s), first: " << (failures.empty() ? "" : failures.front());
}
