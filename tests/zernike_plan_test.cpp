// Internal pieces of the Zernike moments: the CUDA work plan, the point layouts (every pixel of
// the disk visited exactly once, with its 8-fold weight), and agreement of the CPU paths.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cubekit/zernike.hpp"
#include "testing.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

double max_abs_diff(const ZernikeMoments& a, const ZernikeMoments& b) {
    double d = 0.0;
    for (std::size_t i = 0; i < a.values.size(); ++i) d = std::max(d, std::abs(a.values[i] - b.values[i]));
    return d;
}

TEST(ZernikeSmoke, MethodsAndPathsAgree) {
    const Cube img = testing::random_cube(64, 64, 2, DType::U8, 7, 0, 255);
    const int N = 30;
    ZernikeOptions o;
    o.method = ZernikeMethod::Kintner;
    const ZernikeMoments k = zernike_set(cpu_context(), img, N, o);
    EXPECT_TRUE(k.symmetric);
    o.symmetry = false;
    const ZernikeMoments kp = zernike_set(cpu_context(), img, N, o);
    o.method = ZernikeMethod::QRecursive;
    const ZernikeMoments q = zernike_set(cpu_context(), img, N, o);
    o.method = ZernikeMethod::Direct;
    const ZernikeMoments d = zernike_set(cpu_context(), img, N, o);
    const double scale = 255.0 * (N + 1);
    EXPECT_LT(max_abs_diff(k, kp), 1e-12 * scale);
    EXPECT_LT(max_abs_diff(k, q), 1e-12 * scale);
    EXPECT_LT(max_abs_diff(k, d), 1e-12 * scale);
    EXPECT_GT(std::abs(k.at(0, 2, 2)), 0.0);
}

TEST(ZernikeSmoke, SignConventionOfX) {
    const int N = 64;
    Cube img(N, N, 1, DType::F64);
    for (int y = 0; y < N; ++y)
        for (int x = 0; x < N; ++x) img.at<double>(x, y, 0) = (2.0 * x + 1 - N) / N;
    const ZernikeMoments z = zernike_set(cpu_context(), img, 3);
    EXPECT_NEAR(z.at(0, 1, 1).real(), 0.5, 0.01);
    EXPECT_NEAR(z.at(0, 1, 1).imag(), 0.0, 1e-15);
}

// Every wanted moment sits in exactly one slot; tasks respect the kind's rules.
void check_plan(const zernike::Request& rq) {
    const zernike::Plan plan = zernike::make_plan(rq);
    ASSERT_EQ(plan.slot_count.size(), std::size_t(plan.tasks));
    std::vector<int> seen(rq.wanted.size(), 0);
    for (int t = 0; t < plan.tasks; ++t) {
        const int n = plan.slot_count[std::size_t(t)];
        ASSERT_GE(n, 1);
        ASSERT_LE(n, zernike::kMaxSlots);
        const zernike::PlanSlot* s = plan.slots.data() + std::size_t(t) * zernike::kMaxSlots;
        EXPECT_EQ(s[0].start, 1) << "task " << t << " must start a chain";
        for (int i = 0; i < zernike::kMaxSlots; ++i) {
            if (i >= n) {
                EXPECT_EQ(s[i].out, -1);
                continue;
            }
            ASSERT_GE(s[i].out, 0);
            ASSERT_LT(s[i].out, int(rq.wanted.size()));
            ++seen[std::size_t(s[i].out)];
            EXPECT_EQ(s[i].n, rq.wanted[std::size_t(s[i].out)].n);
            EXPECT_EQ(s[i].m, rq.wanted[std::size_t(s[i].out)].m);
            if (i == 0) continue;
            if (plan.kind == zernike::PlanKind::QRec) {
                EXPECT_EQ(s[i].n, s[0].n);      // one order per task
                EXPECT_LT(s[i].m, s[i - 1].m);  // descending repetitions
            } else if (plan.kind == zernike::PlanKind::Chain && !s[i].start) {
                EXPECT_EQ(s[i].m, s[i - 1].m);  // a chain continues in n
                EXPECT_GT(s[i].n, s[i - 1].n);
            }
            if (rq.method == ZernikeMethod::Direct) {
                EXPECT_EQ(s[i].start, 1);
            }
        }
    }
    for (std::size_t k = 0; k < seen.size(); ++k) EXPECT_EQ(seen[k], 1) << "moment " << k;
}

TEST(ZernikePlan, EveryMomentOnceForEveryMethod) {
    for (const ZernikeMethod method : {ZernikeMethod::Kintner, ZernikeMethod::QRecursive, ZernikeMethod::Direct})
        for (const ZernikeRadial radial : {ZernikeRadial::Stable, ZernikeRadial::Explicit})
            for (const int nmax : {0, 1, 7, 34, 60, 100}) {
                SCOPED_TRACE(std::string(zernike_method_name(method)) + " nmax " + std::to_string(nmax));
                zernike::Request rq;
                rq.method = method;
                rq.radial = radial;
                rq.wanted = zernike_set_indices(nmax);
                check_plan(rq);
                rq.wanted = zernike_order_indices(nmax);
                check_plan(rq);
                // A sparse list in arbitrary order: chains and orders with gaps.
                rq.wanted = {{34, 18}, {0, 0}, {25, 13}, {34, 0}, {6, 2}, {34, 34}, {12, 0}, {nmax + 2, nmax % 2}};
                check_plan(rq);
            }
}

TEST(ZernikePlan, WholeSetOfOrder34PacksIntoFewTasks) {
    zernike::Request rq;
    rq.method = ZernikeMethod::Kintner;
    rq.wanted = zernike_set_indices(34);
    ASSERT_EQ(rq.wanted.size(), 324u);
    const zernike::Plan plan = zernike::make_plan(rq);
    // 324 moments in slots of 20: at least 17 tasks; first-fit decreasing reaches 17 or 18.
    EXPECT_LE(plan.tasks, 18);
}

// The representatives of the 8-fold path, each expanded into its distinct mirrors, are exactly
// the pixels of the plain path, each once.
TEST(ZernikeLayout, RepresentativesCoverThePixelsOnce) {
    struct Case { int w, h; ZernikeMapping mapping; };
    std::vector<Case> cases;
    for (int n = 1; n <= 21; ++n) cases.push_back({n, n, ZernikeMapping::Inscribed});
    for (int n : {1, 2, 5, 16, 17}) cases.push_back({n, n, ZernikeMapping::Circumscribed});
    for (auto [w, h] : {std::pair{20, 14}, {14, 20}, {9, 15}, {64, 2}}) cases.push_back({w, h, ZernikeMapping::Inscribed});
    for (const Case& c : cases) {
        SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h) + " " + std::string(zernike_mapping_name(c.mapping)));
        ZernikeOptions o;
        o.mapping = c.mapping;
        const ZernikeDisk disk = zernike_disk(c.w, c.h, o);
        ASSERT_TRUE(disk.symmetric);
        const zernike::PointLayout plain = zernike::point_layout(disk, false);
        const zernike::PointLayout sym = zernike::point_layout(disk, true);
        ASSERT_TRUE(sym.symmetric);
        std::multiset<std::pair<int, int>> from_plain, from_sym;
        for (const auto& r : plain.rows)
            for (int j = 0; j < r.count; ++j) from_plain.insert({r.first + 2 * j, r.v});
        for (const auto& r : sym.rows)
            for (int j = 0; j < r.count; ++j) {
                const int u = r.first + 2 * j, v = r.v;
                ASSERT_GE(u, v);
                ASSERT_GE(v, 0);
                std::set<std::pair<int, int>> mirrors = {{u, v}, {-v, u}, {-u, -v}, {v, -u}, {u, -v}, {v, u}, {-u, v}, {-v, -u}};
                for (const auto& p : mirrors) from_sym.insert(p);
            }
        EXPECT_EQ(from_plain, from_sym);
        EXPECT_EQ(std::int64_t(from_plain.size()), disk.pixel_count);
        for (const auto& [u, v] : from_plain) {
            const int x = (u + c.w - 1) / 2, y = (c.h - 1 - v) / 2;
            EXPECT_TRUE(disk.inside(x, y)) << "(" << x << ", " << y << ")";
        }
    }
}

}  // namespace
}  // namespace cubekit
