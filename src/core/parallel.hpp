#pragma once
// parallel_for: the OpenMP loop for CPU work that checks cancellation, reports progress or may throw.
//
// An exception that leaves an OpenMP parallel region calls std::terminate, so nothing inside a
// region may throw out of it: not Context::check_cancelled, not a body's InvalidInput, not
// std::bad_alloc. parallel_for runs every item (and every thread's set-up) inside a try block.
// Before each item a thread looks at a shared stop flag and at the context's cancellation flag;
// the first exception, or the cancellation, sets the stop flag and every thread skips the items it
// has left. After the region the first exception is rethrown on the calling thread; else, when
// the flag was seen or is set now, Cancelled("<where>: cancelled") is thrown (a flag set at any
// time before the loop returns cancels it, as a check after every item would). Progress is
// reported by the calling thread alone (OpenMP's master thread), from an atomic count of the
// items done, and ends with (n, n) once every item ran: this loop never calls
// ContextOptions::progress from two threads.
//
//     parallel_for(ctx, H, {.where = "rcmg", .progress = true, .schedule = Schedule::Dynamic},
//                  [&] { return std::vector<double>(W); },              // once per thread
//                  [&](std::int64_t y, std::vector<double>& row) { ... });  // once per item
//
// Items run in any order on any thread, each once (unless the loop stops early). The CPU
// references stay identical for every thread count because their bodies write each item's
// result to its own slot; parallel_for changes nothing in a body's arithmetic or order.
// Schedule::Dynamic lets the master thread take items until the end, so its progress reports
// span the whole loop; with Schedule::Static it reports while it works through its own share.
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cubekit/context.hpp"
#include "cubekit/error.hpp"

namespace cubekit::detail {

enum class Schedule { Static, Dynamic };

struct ParallelFor {
    std::string_view where;                ///< names the work: Cancelled says "<where>: cancelled"
    bool progress = false;                 ///< report (items done, n) through Context::progress
    Schedule schedule = Schedule::Static;  ///< OpenMP schedule(static) or schedule(dynamic)
    bool parallel = true;                  ///< false: the calling thread alone (OpenMP's if clause)
};

/// Runs body(i, local) for every i in [0, n) on ctx.threads() OpenMP threads; `local` is made
/// once per thread by make_local() (scratch reused across that thread's items).
template <typename MakeLocal, typename Body>
void parallel_for(const Context& ctx, std::int64_t n, const ParallelFor& loop, MakeLocal&& make_local, Body&& body) {
    using Local = std::decay_t<std::invoke_result_t<MakeLocal&>>;
    ctx.check_cancelled(loop.where);
    std::atomic<bool> stop{false}, cancelled{false};
    std::atomic<std::int64_t> done{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto fail = [&](std::exception_ptr e) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::move(e);
        stop.store(true, std::memory_order_relaxed);
    };
    std::int64_t reported = 0;  // touched by the master thread only

#pragma omp parallel num_threads(ctx.threads()) if (loop.parallel && n > 1)
    {
        const bool master = omp_get_thread_num() == 0;
        std::optional<Local> local;
        try {
            local.emplace(make_local());
        } catch (...) {
            fail(std::current_exception());
        }
        auto item = [&](std::int64_t i) {
            if (stop.load(std::memory_order_relaxed)) return;
            if (ctx.cancel_requested()) {
                cancelled.store(true, std::memory_order_relaxed);
                stop.store(true, std::memory_order_relaxed);
                return;
            }
            try {
                body(i, *local);
                const std::int64_t now = done.fetch_add(1, std::memory_order_relaxed) + 1;
                if (loop.progress && master && now > reported && now < n) {
                    reported = now;
                    ctx.progress(std::size_t(now), std::size_t(n));
                }
            } catch (...) {
                fail(std::current_exception());
            }
        };
        // Every thread meets the worksharing loop, also after a failed set-up (it then skips).
        if (loop.schedule == Schedule::Dynamic) {
#pragma omp for schedule(dynamic)
            for (std::int64_t i = 0; i < n; ++i) item(i);
        } else {
#pragma omp for schedule(static)
            for (std::int64_t i = 0; i < n; ++i) item(i);
        }
    }
    if (error) std::rethrow_exception(error);
    if (cancelled.load() || ctx.cancel_requested()) throw Cancelled(std::string(loop.where) + ": cancelled");
    if (loop.progress && n > 0) ctx.progress(std::size_t(n), std::size_t(n));
}

/// parallel_for without per-thread scratch: body(i).
template <typename Body>
void parallel_for(const Context& ctx, std::int64_t n, const ParallelFor& loop, Body&& body) {
    struct None {};
    parallel_for(ctx, n, loop, [] { return None{}; }, [&](std::int64_t i, None&) { body(i); });
}

}  // namespace cubekit::detail
