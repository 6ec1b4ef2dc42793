// The trained multi-resolution detector against the spec's synthetic oracle (detect.md §B.6,
// "Synthetic sea scene with trained nets"), on scenes it was not trained on.
//
// Recipe (the full-size one, reported in train_mlp.cpp's notes, uses 1024×1024 scenes and the
// default max_windows): train_multires with its defaults on the castaway scenes of seeds 1, 3 and 5;
// detect on seeds 2 and 4. Here the scenes are 512×512 with the same objects (sizes and counts) and
// max_windows = 10 000, to stay within a CI budget of a few seconds.
//
// Oracle: every castaway is covered by at least one box (the box holds one of its pixels, α ≥ 0.5);
// no box lies wholly on a buoy, boat or open water (it holds no pixel that a castaway covers at
// all, α > 0); each box side is ≤ 4× the longer bbox side of a castaway it covers, or the box is
// at_min_scale.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <vector>

#include "cubekit/detect.hpp"
#include "cubekit/detect_train.hpp"
#include "cubekit/synth.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

constexpr SynthOptions kReduced{.width = 512, .height = 512};

/// α > 0 of any castaway at pixel (x, y): 4×4 supersampling of the ellipse (synth.hpp formulas).
bool castaway_touches(const SynthScene& s, int x, int y) {
    for (const SynthObject& o : s.placed) {
        if (o.kind != SynthObjectKind::Castaway) continue;
        if (std::fabs(x + 0.5 - o.cx) > o.radius + 1 || std::fabs(y + 0.5 - o.cy) > o.radius + 1) continue;
        const double c = std::cos(o.angle), sn = std::sin(o.angle);
        for (int j = 0; j < 4; ++j)
            for (int i = 0; i < 4; ++i) {
                const double dx = x + (i + 0.5) / 4 - o.cx, dy = y + (j + 0.5) / 4 - o.cy;
                const double u = dx * c + dy * sn, v = -dx * sn + dy * c;
                if ((u / o.half_length) * (u / o.half_length) + (v / o.half_width) * (v / o.half_width) <= 1) return true;
            }
    }
    return false;
}

struct OracleResult {
    int castaways = 0, covered = 0, boxes = 0, false_boxes = 0, too_large = 0, at_min_scale = 0, largest_side = 0;
};

OracleResult oracle(const SynthScene& s, const MultiresResult& r) {
    OracleResult out{.boxes = int(r.detections.size())};
    std::vector<bool> covered(s.placed.size() + 1, false);
    for (const Window& w : r.detections) {
        std::vector<bool> in_box(s.placed.size() + 1, false);
        bool touched = false;
        for (int y = w.y0; y < w.y0 + w.height; ++y)
            for (int x = w.x0; x < w.x0 + w.width; ++x) {
                const std::int32_t id = s.objects.at<std::int32_t>(x, y, 0);
                if (id > 0 && s.placed[std::size_t(id - 1)].kind == SynthObjectKind::Castaway) in_box[std::size_t(id)] = true;
                touched = touched || (s.coverage.at<float>(x, y, 0) > 0 && castaway_touches(s, x, y));
            }
        int limit = 0;
        for (const SynthObject& o : s.placed)
            if (in_box[std::size_t(o.id)]) covered[std::size_t(o.id)] = true, limit = std::max(limit, 4 * std::max(o.width, o.height));
        out.false_boxes += touched ? 0 : 1;
        out.at_min_scale += w.at_min_scale ? 1 : 0;
        out.largest_side = std::max({out.largest_side, w.width, w.height});
        if (touched && !w.at_min_scale && std::max(w.width, w.height) > limit) ++out.too_large;
    }
    for (const SynthObject& o : s.placed)
        if (o.kind == SynthObjectKind::Castaway) ++out.castaways, out.covered += covered[std::size_t(o.id)] ? 1 : 0;
    return out;
}

TEST(TrainMultiresSea, TrainedDetectorMeetsTheSyntheticOracleOnUnseenScenes) {
    const Context& ctx = testing::cpu_context();
    const auto start = std::chrono::steady_clock::now();
    std::vector<SynthScene> train;
    for (std::uint64_t seed : {1, 3, 5}) train.push_back(synth_castaways(seed, kReduced));
    std::vector<LabelledCube> data;
    for (const SynthScene& s : train) data.push_back({s.cube, s.truth});
    TrainReport report;
    const MultiresModel model = train_multires(ctx, data, {.max_windows = 10000, .end_to_end = false}, &report);
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const NetworkReport& n : report.networks)
        std::cout << "[ note ] " << n.name << ": " << n.epochs << " epochs, stop " << n.stop_reason << ", test AUC " << n.splits.back().auc
                  << "\n";
    std::cout << "[ note ] 3 scenes 512x512, " << report.windows << " windows, trained in " << train_s << " s\n";

    for (std::uint64_t seed : {2, 4}) {
        const SynthScene s = synth_castaways(seed, kReduced);
        const MultiresResult r = detect_multires(ctx, s.cube, model);
        const OracleResult o = oracle(s, r);
        std::cout << "[ note ] seed " << seed << ": " << o.covered << "/" << o.castaways << " castaways covered, " << o.boxes << " boxes ("
                  << o.at_min_scale << " at_min_scale, largest side " << o.largest_side << "), " << o.false_boxes << " false, "
                  << o.too_large << " too large\n";
        EXPECT_EQ(o.covered, o.castaways) << "seed " << seed;
        EXPECT_EQ(o.false_boxes, 0) << "seed " << seed;
        EXPECT_EQ(o.too_large, 0) << "seed " << seed;
        // Deterministic: the same model and scene give the same boxes.
        const MultiresResult again = detect_multires(ctx, s.cube, model);
        ASSERT_EQ(again.detections.size(), r.detections.size());
        for (std::size_t i = 0; i < r.detections.size(); ++i)
            EXPECT_TRUE(again.detections[i].x0 == r.detections[i].x0 && again.detections[i].y0 == r.detections[i].y0 &&
                        again.detections[i].width == r.detections[i].width && again.detections[i].y1 == r.detections[i].y1);
    }
}

}  // namespace
}  // namespace cubekit
