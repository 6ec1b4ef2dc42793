#pragma once
// The families of the stress, determinism and out-of-memory tests (stress_test.cpp on the CPU,
// stress_gpu_test.cpp on CUDA): each runs one call of its family on small fixed inputs and returns
// a digest of every output byte (FNV-1a), compared against a serial run of the same build, never
// against stored values.
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "cubekit/classify.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/labels.hpp"
#include "cubekit/linalg.hpp"
#include "cubekit/watershed.hpp"
#include "cubekit/zernike.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit::testing::stress {

struct Digest {
    std::uint64_t h = 1469598103934665603ull;
    void bytes(const void* p, std::size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    }
    template <class T>
    void values(const std::vector<T>& v) { bytes(v.data(), v.size() * sizeof(T)); }
    void cube(const Cube& c) {
        const CubeShape s = c.shape();
        bytes(&s.width, sizeof s.width), bytes(&s.height, sizeof s.height), bytes(&s.bands, sizeof s.bands);
        if (!c.empty()) bytes(c.bytes(), c.num_bytes());
    }
};

// The inputs, made once: small enough that 400 calls of every family take seconds on 2 cores.
struct Inputs {
    Cube cube = testing::random_cube(48, 40, 6, DType::F32, 1801, 0.0, 1.0, Layout::BIP);
    Cube photo = testing::random_cube(64, 48, 3, DType::U8, 1802, 0, 255, Layout::BIP);
    Cube gray = testing::random_cube(40, 40, 1, DType::F64, 1803, 0.0, 1.0);
    Cube mask = testing::random_cube(50, 40, 1, DType::U8, 1804, 0, 1);
    Cube classes = [] {
        Cube c(48, 40, 1, DType::I32);
        for (int y = 0; y < 40; ++y)
            for (int x = 0; x < 48; ++x) c.at<std::int32_t>(x, y, 0) = (x * 7 + y * 3) % 5 == 0 ? 1 + (x / 16) : 0;
        return c;
    }();
    Cube seeds = [] {  // marker labels 1..7 on a sparse grid of the 40x40 relief, 0 elsewhere
        Cube c(40, 40, 1, DType::I32);
        for (int y = 0; y < 40; ++y)
            for (int x = 0; x < 40; ++x) c.at<std::int32_t>(x, y, 0) = (x % 13 == 3 && y % 11 == 5) ? 1 + (x + y) % 7 : 0;
        return c;
    }();
    RbfnModel rbfn = cubekit::testing::random_rbfn(6, 4, 1805);
    MultiresModel multires = cubekit::testing::step_multires(6);
};
inline const Inputs& inputs() {
    static const Inputs in;
    return in;
}

struct Family {
    std::string name;
    std::function<std::uint64_t(const Context&)> run;
};

inline std::vector<Family> families() {
    const Inputs& in = inputs();
    return {
        {"rcmg", [&](const Context& c) { Digest d; d.cube(rcmg(c, in.cube)); return d.h; }},
        {"kmeans", [&](const Context& c) {
             const KmeansResult r = kmeans(c, in.photo, {.k = 6, .seed = 3});
             Digest d;
             d.values(r.labels), d.values(r.centroids);
             return d.h;
         }},
        {"edges", [&](const Context& c) {
             const EntropyEdgeResult r = entropy_edges(c, in.cube, {.min_component = 3});
             Digest d;
             d.cube(r.edges), d.cube(r.vote_count);
             return d.h;
         }},
        {"edges-pca", [&](const Context& c) { Digest d; d.cube(entropy_edges(c, in.cube, {.fusion = EdgeFusion::PcaEdgeVote}).edges); return d.h; }},
        {"pca", [&](const Context& c) {
             const PcaResult r = pca(c, in.cube);
             Digest d;
             d.cube(r.scores), d.values(r.model.covariance);
             return d.h;
         }},
        {"zernike", [&](const Context& c) { Digest d; d.values(zernike_set(c, in.gray, 12).values); return d.h; }},
        {"labels", [&](const Context& c) { Digest d; d.cube(label_components(c, in.mask, 8).labels); return d.h; }},
        {"watershed", [&](const Context& c) { Digest d; d.cube(watershed(c, in.gray).labels); return d.h; }},
        {"watershed-markers", [&](const Context& c) {
             const CubeView markers = in.seeds.view();
             const WatershedResult r = watershed(c, in.gray, {}, {.markers = &markers});
             Digest d;
             d.cube(r.labels), d.bytes(&r.regions, sizeof r.regions);
             return d.h;
         }},
        {"rbfn", [&](const Context& c) { Digest d; d.cube(detect_pixels(c, in.cube, in.rbfn).score); return d.h; }},
        {"multires", [&](const Context& c) {
             const MultiresResult r = detect_multires(c, in.cube, in.multires);
             Digest d;
             for (const auto& w : r.detections) d.bytes(&w, sizeof w);
             return d.h;
         }},
        {"rx", [&](const Context& c) {
             const BackgroundStats s = fit_background(c, in.cube);
             Digest d;
             d.cube(apply_detector(c, in.cube, s, {}));
             return d.h;
         }},
        {"local-rx", [&](const Context& c) { Digest d; d.cube(local_rx(c, in.cube, {.window = {3, 9}})); return d.h; }},
        {"class-means", [&](const Context& c) {
             const ClassMeans m = train_class_means(c, in.cube, in.classes, Classifier::Sam);
             Digest d;
             d.cube(predict_class_means(c, in.cube, m));
             return d.h;
         }},
    };
}

/// 8 threads x `calls` calls, thread t cycling through the families from 3t; even threads run on a
/// Context of their own (`make_own`), odd ones on `shared`. Returns the failures (a wrong digest or an
/// exception), empty when all 8 x `calls` results equal `want`.
inline std::vector<std::string> run_concurrently(const std::vector<Family>& fams, const std::vector<std::uint64_t>& want,
                                                 const Context& shared, const std::function<Context()>& make_own,
                                                 int calls = 50) {
    std::mutex mutex;
    std::vector<std::string> failures;
    const auto fail = [&](std::string what) {
        const std::lock_guard lock(mutex);
        failures.push_back(std::move(what));
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            try {
                const Context own = make_own();
                const Context& ctx = t % 2 == 0 ? own : shared;
                for (int k = 0; k < calls; ++k) {
                    const std::size_t i = std::size_t(t * 3 + k) % fams.size();
                    try {
                        if (fams[i].run(ctx) != want[i])
                            fail(fams[i].name + " in thread " + std::to_string(t) + ", call " + std::to_string(k));
                    } catch (const std::exception& e) {
                        fail(fams[i].name + ": " + e.what());
                    }
                }
            } catch (const std::exception& e) {
                fail("thread " + std::to_string(t) + ": " + e.what());
            }
        });
    for (std::thread& t : threads) t.join();
    return failures;
}

}  // namespace cubekit::testing::stress
