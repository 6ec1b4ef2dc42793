// The relief the CPU automaton compares: the heights as given, or after the optional steps in
// this order — `levels` quantisation (u32), h-minima (f64 reconstruction by erosion of h + H),
// minima imposition from markers (u64 keys: markers 0, others key + 1, reconstructed by erosion).
#include <cstdint>
#include <vector>

#include "watershed/watershed_internal.hpp"

namespace cubekit::detail {
namespace {

template <class T>
std::vector<std::uint32_t> quantized(const Grid& g, const T* h, std::int64_t levels) {
    double lo = 0, hi = 0;
    relief_range_cpu(g, h, lo, hi);
    check_levels_range(lo, hi, levels);
    std::vector<std::uint32_t> q(std::size_t(g.size()), 0);
    for (std::int64_t p = 0; p < g.size(); ++p)
        if (g.in(p)) q[std::size_t(p)] = level_of(double(h[p]), lo, hi, double(levels - 1));
    return q;
}

template <class T>
std::vector<double> h_minima(const Grid& g, const std::vector<Step>& steps, const T* h, double depth) {
    std::vector<double> floor(std::size_t(g.size())), raised(std::size_t(g.size()));
    for (std::int64_t p = 0; p < g.size(); ++p) {
        floor[std::size_t(p)] = double(h[p]);
        raised[std::size_t(p)] = floor[std::size_t(p)] + depth;
    }
    reconstruct_by_erosion_cpu(g, steps, floor.data(), raised.data());
    return raised;
}

template <class T>
std::vector<std::uint64_t> imposed(const Grid& g, const std::vector<Step>& steps, const T* h,
                                   const std::int32_t* markers) {
    std::vector<std::uint64_t> floor(std::size_t(g.size())), relief(std::size_t(g.size()));
    for (std::int64_t p = 0; p < g.size(); ++p) {
        const bool seed = markers[p] > 0;
        floor[std::size_t(p)] = seed ? 0 : height_key(h[p]) + 1;
        relief[std::size_t(p)] = seed ? 0 : unreached_key;
    }
    reconstruct_by_erosion_cpu(g, steps, floor.data(), relief.data());
    return relief;
}

// Stage 0: levels, 1: h-minima, 2: markers, 3: the automaton.
template <class T>
std::int64_t run_stage(const Context& ctx, const HostWatershed& w, const T* h, int stage) {
    const WatershedOptions& o = w.options;
    if (stage == 0 && o.levels > 0) {
        const std::vector<std::uint32_t> q = quantized(w.grid, h, o.levels);
        return run_stage(ctx, w, q.data(), 1);
    }
    if (stage <= 1 && o.h_min > 0) {
        const std::vector<double> r = h_minima(w.grid, w.steps, h, o.h_min);
        return run_stage(ctx, w, r.data(), 2);
    }
    if (stage <= 2 && w.markers) {
        const std::vector<std::uint64_t> r = imposed(w.grid, w.steps, h, w.markers);
        return watershed_cpu(ctx, w.grid, r.data(), w.steps, w.markers, w.labels);
    }
    return watershed_cpu(ctx, w.grid, h, w.steps, w.markers, w.labels);
}

}  // namespace

template <class T>
std::int64_t watershed_host(const Context& ctx, const HostWatershed& w, const T* h) {
    return run_stage(ctx, w, h, 0);
}

template <class T>
std::vector<std::uint32_t> quantize_levels_host(const Grid& g, const T* h, std::int64_t levels) {
    return quantized(g, h, levels);
}

#define CUBEKIT_WATERSHED_HOST(T)                                                                   \
    template std::int64_t watershed_host<T>(const Context&, const HostWatershed&, const T*);        \
    template std::vector<std::uint32_t> quantize_levels_host<T>(const Grid&, const T*, std::int64_t);
CUBEKIT_WATERSHED_HOST(std::uint8_t)
CUBEKIT_WATERSHED_HOST(std::uint16_t)
CUBEKIT_WATERSHED_HOST(std::int16_t)
CUBEKIT_WATERSHED_HOST(std::uint32_t)
CUBEKIT_WATERSHED_HOST(std::int32_t)
CUBEKIT_WATERSHED_HOST(float)
CUBEKIT_WATERSHED_HOST(double)
#undef CUBEKIT_WATERSHED_HOST

}  // namespace cubekit::detail
