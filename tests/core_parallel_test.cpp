// Cancellation, exceptions and progress of the CPU loops on several OpenMP threads (issue 12, item 6).
// An exception that leaves an OpenMP parallel region ends the program (std::terminate): on code that
// lets one escape, the tests below that expect a throw from a 4-thread run crash the test binary.
// Progress must come from one thread (the caller's), never two calls at once, and end at the total.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/parallel.hpp"
#include "cubekit/context.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/labels.hpp"
#include "cubekit/zernike.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

constexpr int kThreads = 4;

// Watches a progress callback: calls that overlap, calls from a thread other than the one that
// made the probe, every (done, total) seen; `hook` runs inside the call (e.g. to cancel).
struct ProgressProbe {
    std::atomic<int> inside{0}, overlaps{0}, foreign{0};
    std::thread::id caller = std::this_thread::get_id();
    std::mutex mutex;
    std::vector<std::pair<std::size_t, std::size_t>> seen;
    std::function<void(std::size_t, std::size_t)> hook;

    void operator()(std::size_t done, std::size_t total) {
        if (inside.fetch_add(1) != 0) ++overlaps;
        if (std::this_thread::get_id() != caller) ++foreign;
        {
            const std::lock_guard<std::mutex> lock(mutex);
            seen.emplace_back(done, total);
        }
        if (hook) hook(done, total);
        std::this_thread::sleep_for(std::chrono::microseconds(100));  // widens the window for an overlap
        inside.fetch_sub(1);
    }
    std::function<void(std::size_t, std::size_t)> callback() {
        return [this](std::size_t done, std::size_t total) { (*this)(done, total); };
    }
    // Done never goes back within one total, and the last call is (total, total).
    void expect_serial_and_complete(std::size_t total) const {
        EXPECT_EQ(overlaps.load(), 0);
        EXPECT_EQ(foreign.load(), 0) << "progress reported from a thread other than the caller's";
        ASSERT_FALSE(seen.empty());
        for (std::size_t i = 1; i < seen.size(); ++i) {
            if (seen[i].second == seen[i - 1].second) {
                EXPECT_GE(seen[i].first, seen[i - 1].first) << "call " << i;
            }
        }
        EXPECT_EQ(seen.back().first, total);
        EXPECT_EQ(seen.back().second, total);
    }
};

Context cpu_context(ProgressProbe* probe, const std::atomic<bool>* cancel, int threads = kThreads) {
    ContextOptions o{.backend = Backend::Cpu, .threads = threads, .cancel = cancel};
    if (probe) o.progress = probe->callback();
    return Context(std::move(o));
}

template <typename F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no exception)";
}

// ---- the helper itself ----

TEST(ParallelFor, EveryItemOnceAndProgressFromTheCallingThread) {
    for (const auto schedule : {detail::Schedule::Static, detail::Schedule::Dynamic}) {
        ProgressProbe probe;
        const Context ctx = cpu_context(&probe, nullptr);
        constexpr std::int64_t n = 2000;
        std::vector<std::atomic<int>> runs(n);
        std::atomic<int> team{0};
        detail::parallel_for(ctx, n, {.where = "test", .progress = true, .schedule = schedule},
                             [&](std::int64_t i) {
                                 team = std::max(team.load(), omp_get_num_threads());
                                 ++runs[std::size_t(i)];
                             });
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[std::size_t(i)].load(), 1) << "item " << i;
        EXPECT_EQ(team.load(), kThreads);
        probe.expect_serial_and_complete(n);
    }
}

TEST(ParallelFor, PerThreadScratchIsMadeOncePerThread) {
    const Context ctx = cpu_context(nullptr, nullptr);
    std::atomic<int> made{0};
    std::vector<int> owner(1000, -1);
    detail::parallel_for(
        ctx, 1000, {.where = "test"},
        [&] {
            ++made;
            return omp_get_thread_num();
        },
        [&](std::int64_t i, int& thread) { owner[std::size_t(i)] = thread; });
    EXPECT_EQ(made.load(), kThreads);
    for (std::size_t i = 0; i < owner.size(); ++i) ASSERT_GE(owner[i], 0);
}

TEST(ParallelFor, SerialWhenAskedRunsOnTheCallingThread) {
    const Context ctx = cpu_context(nullptr, nullptr);
    const auto me = std::this_thread::get_id();
    std::atomic<int> elsewhere{0};
    detail::parallel_for(ctx, 500, {.where = "test", .parallel = false}, [&](std::int64_t) {
        if (std::this_thread::get_id() != me) ++elsewhere;
    });
    EXPECT_EQ(elsewhere.load(), 0);
}

TEST(ParallelFor, BodyExceptionReachesTheCallerAndStopsTheLoop) {
    for (const auto schedule : {detail::Schedule::Static, detail::Schedule::Dynamic}) {
        const Context ctx = cpu_context(nullptr, nullptr);
        constexpr std::int64_t n = 100000;
        std::atomic<std::int64_t> ran{0};
        auto run = [&] {
            detail::parallel_for(ctx, n, {.where = "test", .schedule = schedule}, [&](std::int64_t i) {
                ++ran;
                if (i == 517) throw InvalidInput("test: item 517 is bad");
                std::this_thread::sleep_for(std::chrono::microseconds(1));
            });
        };
        EXPECT_THROW(run(), InvalidInput);
        EXPECT_EQ(message_of(run), "test: item 517 is bad");
        EXPECT_LT(ran.load(), 2 * n) << "the threads went on after the failure";
    }
}

TEST(ParallelFor, ScratchExceptionReachesTheCaller) {
    const Context ctx = cpu_context(nullptr, nullptr);
    std::atomic<int> ran{0};
    auto run = [&] {
        detail::parallel_for(
            ctx, 1000, {.where = "test"},
            [&] {
                if (omp_get_thread_num() == 2) throw std::bad_alloc();
                return 0;
            },
            [&](std::int64_t, int&) { ++ran; });
    };
    EXPECT_THROW(run(), std::bad_alloc);
}

TEST(ParallelFor, CancelledBeforeTheCallRunsNothing) {
    std::atomic<bool> cancel{true};
    const Context ctx = cpu_context(nullptr, &cancel);
    std::atomic<int> ran{0};
    auto run = [&] { detail::parallel_for(ctx, 1000, {.where = "looping"}, [&](std::int64_t) { ++ran; }); };
    EXPECT_THROW(run(), Cancelled);
    EXPECT_EQ(message_of(run), "looping: cancelled");
    EXPECT_EQ(ran.load(), 0);
}

TEST(ParallelFor, CancelledDuringTheLoopStopsIt) {
    std::atomic<bool> cancel{false};
    ProgressProbe probe;
    const Context ctx = cpu_context(&probe, &cancel);
    constexpr std::int64_t n = 100000;
    std::atomic<std::int64_t> ran{0};
    auto run = [&] {
        detail::parallel_for(ctx, n, {.where = "looping", .progress = true, .schedule = detail::Schedule::Dynamic},
                             [&](std::int64_t i) {
                                 ++ran;
                                 if (i == 300) cancel = true;
                                 std::this_thread::sleep_for(std::chrono::microseconds(1));
                             });
    };
    EXPECT_EQ(message_of(run), "looping: cancelled");
    EXPECT_LT(ran.load(), n);
    EXPECT_EQ(probe.overlaps.load(), 0);
    EXPECT_EQ(probe.foreign.load(), 0);
    for (const auto& [done, total] : probe.seen) EXPECT_LT(done, total) << "a cancelled loop reported completion";
}

// A progress callback (run by the master thread inside the region) may set the flag or throw: the
// loop stops and the caller gets Cancelled or the exception. On a loaded machine the master may not
// report before the others finish every item; then the hook never runs and the loop completes.
TEST(ParallelFor, ProgressCallbackMaySetTheFlagOrThrow) {
    std::atomic<bool> cancel{false}, fired{false};
    ProgressProbe probe;
    probe.hook = [&](std::size_t done, std::size_t total) {
        if (done == total) return;  // the final report comes after the loop
        fired = true;
        cancel = true;
    };
    const Context ctx = cpu_context(&probe, &cancel);
    const detail::ParallelFor loop{.where = "t", .progress = true, .schedule = detail::Schedule::Dynamic};
    auto slow = [](std::int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(20)); };
    const std::string cancelled = message_of([&] { detail::parallel_for(ctx, 20000, loop, slow); });
    EXPECT_EQ(cancelled, fired ? "t: cancelled" : "(no exception)");

    std::atomic<bool> threw{false};
    ProgressProbe thrower;
    thrower.hook = [&](std::size_t, std::size_t) {
        threw = true;
        throw std::runtime_error("stop here");
    };
    const Context ctx2 = cpu_context(&thrower, nullptr);
    const std::string stopped = message_of([&] { detail::parallel_for(ctx2, 20000, loop, slow); });
    EXPECT_EQ(stopped, threw ? "stop here" : "(no exception)");
}

TEST(ParallelFor, EmptyRangeDoesNothing) {
    ProgressProbe probe;
    const Context ctx = cpu_context(&probe, nullptr);
    detail::parallel_for(ctx, 0, {.where = "t", .progress = true}, [](std::int64_t) { FAIL(); });
    EXPECT_TRUE(probe.seen.empty());
}

// ---- Context::progress: one call at a time, whatever the thread ----

TEST(ContextProgress, CallsFromSeveralThreadsNeverOverlap) {
    std::atomic<int> inside{0}, overlaps{0}, calls{0};
    const Context ctx({.backend = Backend::Cpu, .threads = kThreads, .progress = [&](std::size_t, std::size_t) {
                           if (inside.fetch_add(1) != 0) ++overlaps;
                           ++calls;
                           std::this_thread::sleep_for(std::chrono::microseconds(50));
                           inside.fetch_sub(1);
                       }});
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&ctx] {
            for (int i = 0; i < 200; ++i) ctx.progress(std::size_t(i), 200);
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(calls.load(), kThreads * 200);
    EXPECT_EQ(overlaps.load(), 0);
}

TEST(ContextProgress, CancelRequestedNeverThrows) {
    std::atomic<bool> cancel{false};
    const Context ctx = cpu_context(nullptr, &cancel);
    EXPECT_FALSE(ctx.cancel_requested());
    cancel = true;
    EXPECT_TRUE(ctx.cancel_requested());
    EXPECT_FALSE(cpu_context(nullptr, nullptr).cancel_requested());
}

// ---- the families' CPU references on 4 threads ----

TEST(ParallelFamilies, RcmgProgressIsSerialAndResultsDoNotDependOnThreads) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const Cube cube = testing::random_cube(97, 301, 5, DType::F32, seed, -10.0, 10.0);
    for (const int conn : {4, 8}) {
        ProgressProbe probe;
        const Cube many = rcmg(cpu_context(&probe, nullptr), cube, {.connectivity = conn});
        probe.expect_serial_and_complete(301);
        const Cube one = rcmg(cpu_context(nullptr, nullptr, 1), cube, {.connectivity = conn});
        ASSERT_EQ(many.num_bytes(), one.num_bytes());
        EXPECT_EQ(std::memcmp(many.bytes(), one.bytes(), one.num_bytes()), 0) << "connectivity " << conn;
    }
}

// The flag set from the first progress report (the old loop then threw out of its OpenMP region:
// std::terminate), and set before the call.
TEST(ParallelFamilies, RcmgCancelledFromProgressOrBefore) {
    const Cube cube = testing::random_cube(64, 2000, 4, DType::U16, 7, 0.0, 4000.0);
    std::atomic<bool> cancel{false}, fired{false};
    ProgressProbe probe;
    probe.hook = [&](std::size_t done, std::size_t total) {
        if (done == total) return;  // the final report comes after the loop
        fired = true;
        cancel = true;
    };
    const std::string what = message_of([&] { (void)rcmg(cpu_context(&probe, &cancel), cube); });
    // Only a machine too loaded to let the master thread report before the others end gives no report.
    EXPECT_EQ(what, fired ? "rcmg: cancelled" : "(no exception)");
    EXPECT_EQ(probe.overlaps.load(), 0);
    EXPECT_EQ(probe.foreign.load(), 0);
    cancel = true;
    EXPECT_THROW((void)rcmg(cpu_context(nullptr, &cancel), cube), Cancelled);
}

TEST(ParallelFamilies, ZernikeCancelledFromProgressOrBefore) {
    const Cube images = testing::random_cube(80, 80, 4, DType::F64, 11, 0.0, 1.0);
    std::atomic<bool> cancel{false};
    ProgressProbe probe;
    probe.hook = [&](std::size_t done, std::size_t) {
        if (done >= 1) cancel = true;
    };
    EXPECT_THROW((void)zernike_set(cpu_context(&probe, &cancel), images, 12), Cancelled);
    EXPECT_EQ(probe.overlaps.load(), 0);
    EXPECT_EQ(probe.foreign.load(), 0);

    // Uncancelled: serial progress, and the same moments on 1 and 4 threads.
    ProgressProbe clean;
    const ZernikeMoments many = zernike_set(cpu_context(&clean, nullptr), images, 12);
    clean.expect_serial_and_complete(4);
    const ZernikeMoments one = zernike_set(cpu_context(nullptr, nullptr, 1), images, 12);
    ASSERT_EQ(many.values.size(), one.values.size());
    EXPECT_EQ(std::memcmp(many.values.data(), one.values.data(), one.values.size() * sizeof(one.values[0])), 0);

    std::atomic<bool> set{true};
    EXPECT_THROW((void)zernike_set(cpu_context(nullptr, &set), images, 12), Cancelled);
    EXPECT_THROW((void)zernike_reconstruct(cpu_context(nullptr, &set), many), Cancelled);
    const Cube back = zernike_reconstruct(cpu_context(nullptr, nullptr), many);
    const Cube back1 = zernike_reconstruct(cpu_context(nullptr, nullptr, 1), many);
    EXPECT_EQ(std::memcmp(back.bytes(), back1.bytes(), back.num_bytes()), 0);
}

TEST(ParallelFamilies, KmeansCancelledFromProgressOrBefore) {
    const Cube image = testing::random_cube(256, 256, 3, DType::U8, 5, 0.0, 255.0, Layout::BIP);
    std::atomic<bool> cancel{false};
    ProgressProbe probe;
    probe.hook = [&](std::size_t done, std::size_t) {
        if (done >= 1) cancel = true;
    };
    const KmeansOptions o{.k = 6, .max_iter = 5, .n_init = 3};
    EXPECT_THROW((void)kmeans(cpu_context(&probe, &cancel), image, o), Cancelled);
    EXPECT_EQ(probe.overlaps.load(), 0);
    EXPECT_EQ(probe.foreign.load(), 0);
    EXPECT_THROW((void)kmeans(cpu_context(nullptr, &cancel), image, o), Cancelled);
    ProgressProbe clean;
    (void)kmeans(cpu_context(&clean, nullptr), image, o);
    clean.expect_serial_and_complete(3);
}

TEST(ParallelFamilies, BaselineCancelledFromProgressOrBefore) {
    const Cube cube = testing::random_cube(120, 90, 4, DType::U8, 3, 0.0, 255.0);
    for (const auto method : {BaselineMethod::Sobel, BaselineMethod::LoG, BaselineMethod::Canny}) {
        std::atomic<bool> cancel{false};
        ProgressProbe probe;
        probe.hook = [&](std::size_t done, std::size_t) {
            if (done >= 1) cancel = true;
        };
        BaselineOptions o;
        o.method = method;
        EXPECT_THROW((void)baseline_edges(cpu_context(&probe, &cancel), cube, o), Cancelled);
        EXPECT_EQ(probe.overlaps.load(), 0);
        EXPECT_EQ(probe.foreign.load(), 0);
        EXPECT_THROW((void)baseline_edges(cpu_context(nullptr, &cancel), cube, o), Cancelled);
    }
}

TEST(ParallelFamilies, LabelsCancelledBefore) {
    const Cube mask = testing::random_cube(64, 64, 6, DType::U8, 9, 0.0, 1.0);
    std::atomic<bool> cancel{true};
    EXPECT_THROW((void)label_components(cpu_context(nullptr, &cancel), mask), Cancelled);
    EXPECT_THROW((void)remove_small_components(cpu_context(nullptr, &cancel), mask, 5), Cancelled);
    const Components a = label_components(cpu_context(nullptr, nullptr), mask);
    const Components b = label_components(cpu_context(nullptr, nullptr, 1), mask);
    EXPECT_EQ(std::memcmp(a.labels.bytes(), b.labels.bytes(), a.labels.num_bytes()), 0);
}

}  // namespace
}  // namespace cubekit
