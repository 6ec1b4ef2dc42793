// k-means CPU engine: the §3.4 initialisation restated independently (Philox4x32-10 with its
// known answers, the init sample, greedy k-means++, Floyd's random pick, the box diagonal) and
// oracle 2 of kmeans.md §5 (same seed → same result, whatever the layout; restart i = seed + i).
// Shared helpers: kmeans_test_helpers.hpp. Runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kmeans_test_helpers.hpp"

namespace cubekit {
namespace {

using namespace kmeans_test;

// ---- §3.4 initialisation, restated: Philox4x32-10, the init sample, greedy k-means++, Floyd ----

struct Philox {
    std::uint32_t v[4];
};
// Philox4x32-10 (Salmon et al., SC'11), written from the paper's constants.
Philox philox4x32_10(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t p0 = std::uint64_t(0xD2511F53u) * c0, p1 = std::uint64_t(0xCD9E8D57u) * c2;
        const std::uint32_t n0 = std::uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = std::uint32_t(p1), n2 = std::uint32_t(p0 >> 32) ^ c3 ^ k1,
                            n3 = std::uint32_t(p0);
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return Philox{{c0, c1, c2, c3}};
}
// The 53 bits of u = ((x0·2^32 + x1) >> 11)·2^−53 for (key = seed, counter = (draw index, stream)).
std::uint64_t bits53(std::uint64_t seed, std::uint32_t stream, std::uint64_t counter) {
    const Philox r = philox4x32_10(std::uint32_t(counter), std::uint32_t(counter >> 32), stream, 0, std::uint32_t(seed),
                                   std::uint32_t(seed >> 32));
    return ((std::uint64_t(r.v[0]) << 32) | r.v[1]) >> 11;
}

TEST(Kmeans, PhiloxKnownAnswers) {  // Random123's known-answer vectors for the helper above
    const Philox a = philox4x32_10(0, 0, 0, 0, 0, 0);
    EXPECT_EQ(a.v[0], 0x6627e8d5u);
    EXPECT_EQ(a.v[3], 0x9b00dbd8u);
    const Philox b = philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
    EXPECT_EQ(b.v[0], 0x408f276du);
    EXPECT_EQ(b.v[3], 0x6d5451fdu);
    const Philox c = philox4x32_10(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0);
    EXPECT_EQ(c.v[0], 0xd16cfe09u);
    EXPECT_EQ(c.v[1], 0x94fdccebu);
    EXPECT_EQ(c.v[2], 0x5001e420u);
    EXPECT_EQ(c.v[3], 0x24126ea1u);
}

// The init sample T (valid indices): pixel i is in when u_i (stream 0, counter i) < init_sample/N,
// decided exactly in integers.
std::vector<std::int64_t> reference_sample(std::int64_t N, std::int64_t init_sample, std::uint64_t seed) {
    std::vector<std::int64_t> T;
    for (std::int64_t i = 0; i < N; ++i)
        if (init_sample == 0 || N <= init_sample || (unsigned __int128)bits53(seed, 0, std::uint64_t(i)) * (unsigned __int128)N <
                                                         ((unsigned __int128)init_sample << 53))
            T.push_back(i);
    return T;
}

// Greedy k-means++ on T for integer data (exact integer distances); returns the valid indices
// of the centres (fewer than k when T has fewer distinct vectors).
std::vector<std::int64_t> reference_kmeanspp(const ValidSet& s, const std::vector<std::int64_t>& T, int k, std::uint64_t seed) {
    const auto n = std::int64_t(T.size());
    const int L = 2 + int(std::floor(std::log(double(k))));
    auto d = [&](std::int64_t a, std::int64_t b) {
        std::int64_t sum = 0;
        for (int q = 0; q < s.m; ++q) {
            const auto diff = std::int64_t(s.px(a)[q]) - std::int64_t(s.px(b)[q]);
            sum += diff * diff;
        }
        return sum;
    };
    std::vector<std::int64_t> centres = {T[std::size_t(((unsigned __int128)bits53(seed, 1, 0) * (unsigned __int128)n) >> 53)]};
    std::vector<std::int64_t> D(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) D[i] = d(T[i], centres[0]);
    for (int t = 1; t < k; ++t) {
        __int128 phi = 0;
        for (std::int64_t v : D) phi += v;
        if (phi == 0) break;
        std::int64_t best = -1;
        __int128 best_phi = 0;
        for (int l = 0; l < L; ++l) {
            const auto u = (__int128)bits53(seed, 2, std::uint64_t(t) * L + l);
            // first position whose inclusive prefix sum P exceeds u·φ (u = bits·2^−53): P·2^53 > bits·φ
            __int128 P = 0;
            std::int64_t cand = -1;
            for (std::int64_t i = 0; i < n && cand < 0; ++i) {
                P += D[i];
                if (P * ((__int128)1 << 53) > u * phi) cand = i;
            }
            __int128 phi_l = 0;
            for (std::int64_t i = 0; i < n; ++i) phi_l += std::min(D[i], d(T[i], T[cand]));
            if (best < 0 || phi_l < best_phi) best = cand, best_phi = phi_l;
        }
        centres.push_back(T[best]);
        for (std::int64_t i = 0; i < n; ++i) D[i] = std::min(D[i], d(T[i], T[best]));
    }
    return centres;
}

// Random init: k distinct positions of T by Floyd's algorithm, draw j − (n − k) of stream 3.
std::vector<std::int64_t> reference_random(const std::vector<std::int64_t>& T, int k, std::uint64_t seed) {
    const auto n = std::int64_t(T.size());
    std::set<std::int64_t> chosen;
    std::vector<std::int64_t> out;
    for (std::int64_t j = n - k; j < n; ++j) {
        auto t = std::int64_t(((unsigned __int128)bits53(seed, 3, std::uint64_t(j - (n - k))) * (unsigned __int128)(j + 1)) >> 53);
        if (chosen.count(t)) t = j;
        chosen.insert(t);
        out.push_back(T[t]);
    }
    return out;
}

TEST(Kmeans, InitialisationsFollowTheSpecDraws) {
    // max_iter = 0 runs the final pass on the initial centroids, which are then reported
    // (sorted by count): compare them as a multiset with the restated §3.4 procedures.
    struct Case { int W, H, m; DType t; };
    for (const Case& c : {Case{71, 53, 3, DType::U8}, Case{40, 30, 4, DType::I16}, Case{97, 13, 1, DType::U16}}) {
        const std::uint64_t dseed = test_seed();
        const auto [lo, hi] = data_range(c.t);
        const Cube img = testing::random_cube(c.W, c.H, c.m, c.t, dseed, lo, hi);
        const ValidSet s = valid_set(img);
        for (std::uint64_t seed : {std::uint64_t(0), std::uint64_t(12345), std::uint64_t(0x123456789abcdefULL)})
            for (std::int64_t sample : {std::int64_t(0), std::int64_t(600)})
                for (int k : {1, 2, 7, 16}) {
                    SCOPED_TRACE(str(c.t) + " m=" + std::to_string(c.m) + " data seed " + std::to_string(dseed) + " seed " +
                                 std::to_string(seed) + " init_sample " + std::to_string(sample) + " k=" + std::to_string(k));
                    const std::vector<std::int64_t> T = reference_sample(s.size(), sample, seed);
                    ASSERT_GE(T.size(), std::size_t(k));
                    for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random}) {
                        const std::vector<std::int64_t> idx =
                            init == KmeansInit::Random ? reference_random(T, k, seed) : reference_kmeanspp(s, T, k, seed);
                        ASSERT_EQ(idx.size(), std::size_t(k));
                        std::vector<std::vector<double>> want;
                        for (std::int64_t i : idx) want.emplace_back(s.px(i), s.px(i) + c.m);
                        std::sort(want.begin(), want.end());
                        const KmeansOptions o{.k = k, .init = init, .seed = seed, .init_sample = sample, .max_iter = 0};
                        const KmeansResult r = run(img, o);
                        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
                        EXPECT_EQ(centroid_set(r, false), want) << kmeans_init_name(init);
                    }
                }
    }
}

// ---- Oracle 2: determinism and restarts ------------------------------------------------------------

TEST(Kmeans, SameSeedSameResultAndLayoutDoesNotMatter) {
    for (DType t : {DType::U8, DType::F32, DType::U16, DType::F64}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(t) + " seed " + std::to_string(seed));
        const auto [lo, hi] = data_range(t);
        const Cube img = testing::random_cube(97, 61, 4, t, seed, lo, hi, Layout::BSQ);
        for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal}) {
            const KmeansOptions o{.k = 13, .init = init, .seed = seed, .init_sample = 2000, .max_iter = 15};
            const KmeansResult a = run(img, o);
            ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, a));
            expect_identical_results(a, run(img, o), std::string(kmeans_init_name(init)) + " second run");
            expect_identical_results(a, run(img.to_layout(Layout::BIP), o), std::string(kmeans_init_name(init)) + " BIP input");
            expect_identical_results(a, run(img.to_layout(Layout::BIL), o), std::string(kmeans_init_name(init)) + " BIL input");
            KmeansOptions no_paint = o;
            no_paint.paint = false;
            no_paint.history = false;
            const KmeansResult np = run(img, no_paint);
            EXPECT_EQ(np.labels, a.labels);
            EXPECT_EQ(np.centroids, a.centroids);
            EXPECT_TRUE(np.history.empty());
        }
    }
}

TEST(Kmeans, RestartsPickLowestInertia) {
    for (DType t : {DType::U8, DType::F32}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(t) + " seed " + std::to_string(seed));
        const Cube img = testing::random_cube(89, 67, 3, t, seed, 0, 255);
        for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random}) {
            const KmeansOptions o{.k = 12, .init = init, .seed = seed, .init_sample = 500, .max_iter = 4, .n_init = 4};
            const KmeansResult r = run(img, o);
            ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
            double best = r.restarts[0].inertia;
            for (const KmeansRun& run_r : r.restarts) best = std::min(best, run_r.inertia);
            EXPECT_LE(r.inertia, best * (1 + 1e-12)) << "winner " << r.winner;
            for (int i = 0; i < r.winner; ++i)
                EXPECT_GT(r.restarts[i].inertia, r.inertia * (1 - 1e-12)) << "restart " << i << " is as good as the winner " << r.winner << " and comes first";
            // Restart i is the single run with seed + i.
            for (int i = 0; i < o.n_init; ++i) {
                KmeansOptions one = o;
                one.n_init = 1;
                one.seed = o.seed + i;
                const KmeansResult single = run(img, one);
                EXPECT_TRUE(same_bits(single.inertia, r.restarts[i].inertia)) << "restart " << i;
                EXPECT_EQ(single.iterations, r.restarts[i].iterations) << "restart " << i;
                if (i == r.winner) {
                    EXPECT_EQ(single.labels, r.labels);
                    EXPECT_EQ(single.centroids, r.centroids);
                    EXPECT_EQ(single.counts, r.counts);
                    EXPECT_TRUE(cubes_identical(single.quantized, r.quantized));
                }
            }
            expect_identical_results(r, run(img, o), "n_init = 4, second run");
        }
    }
}

// ---- Box-diagonal initialisation --------------------------------------------------------------------

TEST(Kmeans, BoxDiagonalInitIsEvenlySpaced) {
    for (DType t : {DType::U8, DType::F32, DType::I16})
        for (int k : {1, 2, 4, 7}) {
            const std::uint64_t seed = test_seed();
            SCOPED_TRACE(str(t) + " k=" + std::to_string(k) + " seed " + std::to_string(seed));
            const auto [lo, hi] = data_range(t);
            const Cube img = testing::random_cube(31, 19, 3, t, seed, lo, hi);
            const KmeansOptions o{.k = k, .init = KmeansInit::BoxDiagonal, .max_iter = 0};
            const KmeansResult r = run(img, o);
            ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
            const ValidSet s = valid_set(img);
            std::vector<double> blo(3, INFINITY), bhi(3, -INFINITY);
            for (std::int64_t i = 0; i < s.size(); ++i)
                for (int b = 0; b < 3; ++b) blo[b] = std::min(blo[b], s.px(i)[b]), bhi[b] = std::max(bhi[b], s.px(i)[b]);
            std::vector<std::vector<double>> want;
            std::vector<double> flat;
            for (int j = 0; j < k; ++j) {
                std::vector<double> c(3);
                for (int b = 0; b < 3; ++b)
                    c[b] = as_centroid(k == 1 ? (blo[b] + bhi[b]) / 2 : blo[b] + j * (bhi[b] - blo[b]) / (k - 1), t);
                want.push_back(c);
                flat.insert(flat.end(), c.begin(), c.end());
            }
            std::vector<std::vector<double>> got;
            for (int j = 0; j < k; ++j) got.push_back(centroid(r, j));
            std::sort(want.begin(), want.end());
            std::sort(got.begin(), got.end());
            EXPECT_EQ(got, want);
            for (std::int64_t i = 0; i < s.size(); ++i) {
                const int j = nearest(s.px(i), flat, k, 3, false);
                ASSERT_EQ(centroid(r, r.labels[s.raster[i]]), std::vector<double>(flat.begin() + 3 * j, flat.begin() + 3 * j + 3));
            }
        }
}

}  // namespace
}  // namespace cubekit
