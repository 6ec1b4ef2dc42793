// CUDA k-means (spec kmeans.md §4.2): the engine's control flow on the host, every pass over the
// pixels on the device. The first pass (prepare_cuda.cu) finds the valid pixels and the plan;
// k-means++ (kmeanspp_cuda.cu) chooses its centres on the device; each Lloyd iteration is one
// fused assign + accumulate kernel with the update as a one-block kernel (iterations are queued
// in batches and skip themselves once the device-side status says converged: the host reads a
// 16-byte status per batch, not per iteration); then the final labelling pass and the relabel +
// paint pass write the caller's views. Photos (u8, 1–3 bands) take the colour path: their passes
// run over the distinct colours, weighted by pixel count (colour_kernels.cuh). Everything that
// chooses (the plan, the init draws, the relocation, the sort) runs the CPU reference's code on
// exact integers or bit-identical distances, and only k- and m-sized arrays cross to the host, so
// labels, counts, centroids and iterations equal the CPU's bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "kmeans/cuda_internal.hpp"
#include "kmeans/bounded_kernels.cuh"
#include "kmeans/colour_kernels.cuh"

namespace cubekit::detail {
namespace {

template <typename T, typename D>
class CudaKmeans {
public:
    CudaKmeans(const Context& ctx, const CubeView& image, const MutableCubeView& labels, const MutableCubeView& quantized,
               const KmeansOptions& o, KmeansResult& r)
        : ctx_(ctx), image_(image), o_(o), r_(r), x_(reinterpret_cast<const T*>(image.data())), m_(image.bands()),
          k_(o.k), pixels_(std::int64_t(image.num_pixels())) {
        labels_ = LabelsOut{reinterpret_cast<std::int32_t*>(labels.data()), labels.width(), labels.strides().x,
                            labels.strides().y};
        if (!quantized.empty())
            quantized_ = PaintOut<T>{reinterpret_cast<T*>(quantized.data()), quantized.width(), m_, quantized.strides()};
    }

    void run() {
        keep_pool_memory(ctx_, scratch_bytes());
        plan_ = prepare_kmeans_cuda(ctx_, image_, o_, valid_);
        r_.valid_pixels = n();
        px_ = Pixels<T>{x_, valid_.index.empty() ? nullptr : typed<const std::int64_t>(valid_.index), m_};
        if constexpr (kColourType) build_colours();
        allocate();
        const auto [c, prev] = run_restarts<D>(
            ctx_, o_, r_, [&](std::uint64_t seed) { return initial_centroids(seed); },
            [&](std::vector<D>& cent, std::vector<D>& previous, KmeansRun& run) { lloyd(cent, previous, run); },
            [&](const std::vector<D>& cent, const std::vector<D>& previous) {
                return final_pass(cent, previous, /*labels=*/false, true);
            });
        finish(c, prev);
    }

    using Final = RestartStats;

    // ---- tile mode (kmeans_tile_cuda): the passes below over a tile, with the scene's plan ----
    // Takes the plan and finds the valid pixels instead of the first pass. Tiles run the plain
    // passes: no colour path, no bounds (a tile's pass does not follow its previous one).
    void adopt(const KmeansPlan& plan) {
        tile_ = true;
        plan_ = plan;
        valid_ = valid_set_cuda(ctx_, image_, o_.mask);
        px_ = Pixels<T>{x_, valid_.index.empty() ? nullptr : typed<const std::int64_t>(valid_.index), m_};
        allocate();
    }
    const DeviceValidSet& valid_set() const { return valid_; }

    TileSums tile_assign(const std::vector<D>& c) {
        cent_.upload(ctx_, c.data(), km_elems() * sizeof(D));
        sums_.fill_bytes(ctx_, 0);
        counts_.fill_bytes(ctx_, 0);
        status_.fill_bytes(ctx_, 0);
        launch_assign();
        TileSums s;
        s.sums.resize(km_elems());
        s.counts.resize(std::size_t(k_));
        sums_.download(ctx_, s.sums.data(), s.sums.size() * 8);
        counts_.download(ctx_, s.counts.data(), s.counts.size() * 8);
        std::vector<double> partials(static_cast<std::size_t>(grid_));
        partials_.download(ctx_, partials.data(), partials.size() * sizeof(double));
        for (const double p : partials) s.inertia += p;
        return s;
    }

    // The `wanted` valid pixels farthest from their nearest centroid (index: the valid index), and
    // their values (m each).
    std::pair<std::vector<FarPixel>, std::vector<double>> tile_farthest(const std::vector<D>& c, std::size_t wanted) {
        cent_.upload(ctx_, c.data(), km_elems() * sizeof(D));
        if (n() == 0) return {};
        DeviceBuffer d_near(ctx_, std::size_t(n()) * sizeof(D));
        const auto blocks = unsigned(div_up(n(), kBlock));
        nearest_distance<T, D><<<blocks, kBlock, 0, stream()>>>(px_, n(), k_, typed<const D>(cent_), typed<D>(d_near));
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans nearest_distance", dim3(blocks), dim3(kBlock));
        const std::vector<FarPixel> far =
            farthest_cuda(ctx_, d_near.data(), sizeof(D) == 8 ? DType::F64 : DType::F32, n(), wanted);
        std::vector<std::int64_t> positions;
        for (const FarPixel& f : far) positions.push_back(f.index);
        return {far, gather_pixels_cuda(ctx_, image_, px_.idx, positions)};
    }

    // Labels renumbered (excluded pixels −1) and, when quantized was given, the tile painted.
    void tile_relabel_paint(const std::vector<int>& new_label, const std::vector<double>& palette) {
        relabel_paint_device(new_label, palette);
    }

private:

    // What one call allocates at most (the valid set, the init sample and k-means++ scratch, the
    // colour path's histogram or the bounded passes' per-pixel arrays), kept in the device pool
    // across the call's synchronisations: otherwise the pool unmaps its memory at each one and
    // maps it again at the next allocation (measured on the H100, 2026-11-27: 0.47 ms of a 4K
    // photo's call went to the colour path's 64 MB histogram).
    std::size_t scratch_bytes() const {
        const auto N = std::size_t(pixels_);
        std::size_t bytes = 10 * N + (64u << 20);
        if (m_ > 3) bytes += 8 * N;
        if (kColourType && m_ <= kColourBandsMax) {
            const std::size_t bins = std::size_t(1) << (8 * m_);
            bytes += 4 * bins + 16 * std::min(bins, N);
        }
        return bytes;
    }
    static constexpr bool kColourType = std::is_same_v<T, std::uint8_t>;

    // ---- the colour path (colour_kernels.cuh) ----
    // Used for u8 images of at most 3 bands whose 2^(8m) bins are at most 8 per valid pixel
    // (RGB from 2^21 pixels: 2048×1024 and 4K photos, but not 1920×1080, 1.2 % short; grey from
    // 32 pixels, two bands from 2^13), outside the seed's legacy arithmetic, when the image holds
    // at most half as many colours as pixels.
    // Measured on the H100 (2026-11-27, the 4K photo, 829,582 colours): see bench/results.
    bool colour_path_fits() const {
        return !o_.legacy && m_ <= kColourBandsMax && plan_.e == 0 && n() < (std::int64_t(1) << 31) &&
               (std::int64_t(1) << (8 * m_)) <= 8 * n();
    }

    void build_colours() {
        if (!colour_path_fits()) return;
        const std::int64_t bins = std::int64_t(1) << (8 * m_);
        bins_ = DeviceBuffer(ctx_, std::size_t(bins) * sizeof(unsigned));
        bins_.fill_bytes(ctx_, 0);
        const int grid = int(std::min<std::int64_t>(div_up(n(), kBlock), std::int64_t(sm_count(ctx_)) * 8));
        count_colours<<<grid, kBlock, 0, stream()>>>(px_, n(), m_, typed<unsigned>(bins_));
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans count_colours", dim3(grid), dim3(kBlock));
        const std::int64_t most = std::min(bins, n());
        DeviceBuffer selected(ctx_, std::size_t(most) * sizeof(unsigned)), count_out(ctx_, sizeof(int));
        const thrust::counting_iterator<unsigned> all_bins(0u);
        const NonEmptyBin non_empty{typed<const unsigned>(bins_)};
        std::size_t temp_bytes = 0;
        CUBEKIT_CUDA_CHECK(cub::DeviceSelect::If(nullptr, temp_bytes, all_bins, typed<unsigned>(selected),
                                                 typed<int>(count_out), int(bins), non_empty, stream()));
        DeviceBuffer temp(ctx_, std::max<std::size_t>(temp_bytes, 1));
        CUBEKIT_CUDA_CHECK(cub::DeviceSelect::If(temp.data(), temp_bytes, all_bins, typed<unsigned>(selected),
                                                 typed<int>(count_out), int(bins), non_empty, stream()));
        int count = 0;
        count_out.download(ctx_, &count, sizeof(int));
        if (2 * std::int64_t(count) > n()) {  // too many colours: the per-pixel passes are faster
            bins_ = DeviceBuffer();
            return;
        }
        cbins_ = std::move(selected);
        ncolours_ = count;
        cpacked_ = DeviceBuffer(ctx_, std::size_t(count) * sizeof(unsigned));
        cweights_ = DeviceBuffer(ctx_, std::size_t(count) * sizeof(unsigned));
        const auto blocks = unsigned(div_up(count, kBlock));
        describe_colours<<<blocks, kBlock, 0, stream()>>>(typed<const unsigned>(cbins_), count, m_, typed<const unsigned>(bins_),
                                                         typed<unsigned>(cpacked_), typed<unsigned>(cweights_));
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans describe_colours", dim3(blocks), dim3(kBlock));
        colours_ = true;
    }

    void launch_final_colours(bool want_labels, const std::int64_t* qpaint, bool shared_counts, std::size_t dyn) {
        if constexpr (kColourType) {
            if (want_labels && clabels_.empty()) clabels_ = DeviceBuffer(ctx_, std::size_t(ncolours_) * sizeof(int));
            with_colour_bands([&](auto M) {
                final_colours<D, M><<<grid_, kBlock, dyn, stream()>>>(
                    colours(), k_, typed<const D>(cent_), qpaint, plan_.scale_d, want_labels ? typed<int>(clabels_) : nullptr,
                    typed<u64>(counts_), typed<double>(partials_), typed<u64>(exact_), shared_counts);
            });
            CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans final_colours", dim3(grid_), dim3(kBlock));
        }
    }

    Colours colours() const { return Colours{typed<const unsigned>(cpacked_), typed<const unsigned>(cweights_), ncolours_}; }

    // f(M) with the band count as a compile-time constant (colour path: 1 ≤ m ≤ 3).
    template <typename F>
    void with_colour_bands(F&& f) const {
        if (m_ == 1) f(std::integral_constant<int, 1>{});
        else if (m_ == 2) f(std::integral_constant<int, 2>{});
        else f(std::integral_constant<int, 3>{});
    }

    std::int64_t n() const { return valid_.valid; }
    cudaStream_t stream() const { return stream_of(ctx_); }
    std::size_t km_elems() const { return std::size_t(k_) * std::size_t(m_); }
    // + 16: for 3 bands nvcc loads a centroid with one 16-byte LDS.128 (3 values and the next
    // centroid's first), which reads 4 bytes past the last centroid.
    std::size_t shared_bytes() const { return shared_centroid_offset(k_, m_) + km_elems() * sizeof(D) + 16; }

    void allocate() {
        shared_ = shared_bytes() <= kSharedLimit;
        const int sms = sm_count(ctx_);
        int per_sm = 0;
        const void* kernel = assign_kernel();
        const std::size_t dyn = shared_ ? shared_bytes() : 0;
        // Static shared memory (the staged tiles) and dynamic together may pass 48 KB: opt in.
        CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dyn)));
        CUBEKIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, dyn));
        const std::int64_t items = colours_ ? ncolours_ : n();  // what a pass walks
        grid_ = int(std::max<std::int64_t>(1, std::min<std::int64_t>((items + kBlock - 1) / kBlock,
                                                                       std::int64_t(sms) * std::max(per_sm, 1))));
        cent_ = DeviceBuffer(ctx_, km_elems() * sizeof(D));
        prev_ = DeviceBuffer(ctx_, km_elems() * sizeof(D));
        sums_ = DeviceBuffer(ctx_, km_elems() * 8);
        counts_ = DeviceBuffer(ctx_, std::size_t(k_) * 8);
        partials_ = DeviceBuffer(ctx_, std::size_t(grid_) * sizeof(double));
        status_ = DeviceBuffer(ctx_, sizeof(Status));
        history_ = DeviceBuffer(ctx_, std::size_t(std::max(o_.max_iter, 1)) * sizeof(double));
        shift_ = DeviceBuffer(ctx_, std::size_t(k_) * sizeof(double));
        exact_ = DeviceBuffer(ctx_, 2 * sizeof(u64));
        if (bounded()) {
            assigned_ = DeviceBuffer(ctx_, std::size_t(n()) * sizeof(std::int32_t));
            bound_ = DeviceBuffer(ctx_, std::size_t(n()) * sizeof(float));
            drift_ = DeviceBuffer(ctx_, sizeof(double));
        }
    }

    // Bounded passes (bounded_kernels.cuh) for spectra of more than 3 bands, in runs with
    // iterations and without the seed's legacy arithmetic. Measured on the H100 (2026-11-27): the
    // 610×340×103 f32 cube, k = 9, 50 iterations, 7.18 → 3.69 ms; but the 4K RGB photo, whose
    // pixels sit in registers and whose passes are issue-bound, got slower (k = 16: 1.25 → 1.59 ms,
    // a quarter of the pixels still scanned after 9 iterations; k = 256: 9.8 → 14.1 ms), so 3-band
    // images keep the full pass.
    bool bounded() const { return !tile_ && !o_.legacy && o_.max_iter > 0 && m_ > 3; }

    BoundSlack slack() const {
        const double unit = sizeof(D) == 4 ? 0x1p-24 : 0x1p-53;
        return BoundSlack{(m_ + 3) * unit + 0x1p-48, (m_ + 3) * (sizeof(D) == 4 ? 0x1p-140 : 0x1p-1000)};
    }

    const void* assign_kernel() const {
        if constexpr (kColourType)
            if (colours_) {
                const void* kernel = nullptr;
                with_colour_bands([&](auto M) {
                    kernel = shared_ ? reinterpret_cast<const void*>(&assign_colours<D, M, true>)
                                     : reinterpret_cast<const void*>(&assign_colours<D, M, false>);
                });
                return kernel;
            }
        if (bounded())  // (m > 3: the generic band loop)
            return shared_ ? reinterpret_cast<const void*>(&bounded_assign<T, D, true>)
                           : reinterpret_cast<const void*>(&bounded_assign<T, D, false>);
        if (m_ == 3)
            return shared_ ? reinterpret_cast<const void*>(&assign_accumulate<T, D, 3, true>)
                           : reinterpret_cast<const void*>(&assign_accumulate<T, D, 3, false>);
        return shared_ ? reinterpret_cast<const void*>(&assign_accumulate<T, D, 0, true>)
                       : reinterpret_cast<const void*>(&assign_accumulate<T, D, 0, false>);
    }

    void launch_assign() {
        const std::size_t dyn = shared_ ? shared_bytes() : 0;
        const auto* st = typed<const Status>(status_);
        auto* c = typed<const D>(cent_);
        auto* s = typed<u64>(sums_);
        auto* cn = typed<u64>(counts_);
        auto* p = typed<double>(partials_);
        // Group sums of 64-bit values through 32-bit reductions need |Σ hi| < 2^31 (see the kernel).
        const bool split = std::is_integral_v<T> || n() >= 64;
        if constexpr (kColourType)
            if (colours_) {
                with_colour_bands([&](auto M) {
                    if (shared_) assign_colours<D, M, true><<<grid_, kBlock, dyn, stream()>>>(colours(), k_, c, s, cn, p, st);
                    else assign_colours<D, M, false><<<grid_, kBlock, dyn, stream()>>>(colours(), k_, c, s, cn, p, st);
                });
                CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans assign_colours", dim3(grid_), dim3(kBlock));
                return;
            }
        if (bounded()) {
            auto* a = typed<std::int32_t>(assigned_);
            auto* bd = typed<float>(bound_);
            auto* dr = typed<const double>(drift_);
            const BoundSlack sl = slack();
            if (shared_)
                bounded_assign<T, D, true><<<grid_, kBlock, dyn, stream()>>>(px_, n(), m_, k_, c, s, cn, p, plan_.scale, split, a, bd, dr, sl, st);
            else
                bounded_assign<T, D, false><<<grid_, kBlock, dyn, stream()>>>(px_, n(), m_, k_, c, s, cn, p, plan_.scale, split, a, bd, dr, sl, st);
            CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans bounded_assign", dim3(grid_), dim3(kBlock));
            return;
        }
        if (m_ == 3 && shared_)
            assign_accumulate<T, D, 3, true><<<grid_, kBlock, dyn, stream()>>>(px_, n(), m_, k_, c, s, cn, p, plan_.scale, split, st);
        else if (m_ == 3)
            assign_accumulate<T, D, 3, false><<<grid_, kBlock, dyn, stream()>>>(px_, n(), m_, k_, c, s, cn, p, plan_.scale, split, st);
        else if (shared_)
            assign_accumulate<T, D, 0, true><<<grid_, kBlock, dyn, stream()>>>(px_, n(), m_, k_, c, s, cn, p, plan_.scale, split, st);
        else
            assign_accumulate<T, D, 0, false><<<grid_, kBlock, dyn, stream()>>>(px_, n(), m_, k_, c, s, cn, p, plan_.scale, split, st);
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans assign_accumulate", dim3(grid_), dim3(kBlock));
    }

    void launch_update(bool allow_empty) {
        const bool zero_empty = o_.legacy || o_.empty == EmptyPolicy::LegacyZero;
        const std::size_t dyn = k_ <= kShiftShared ? std::size_t(k_) * sizeof(double) : 0;
        update_centroids<D><<<1, kBlock, dyn, stream()>>>(
            typed<D>(cent_), typed<D>(prev_), typed<u64>(sums_), typed<u64>(counts_), typed<const double>(partials_),
            grid_, k_, m_, plan_.e, zero_empty, o_.legacy, allow_empty, plan_.tol_abs, o_.max_iter,
            o_.history ? typed<double>(history_) : nullptr, typed<double>(shift_),
            bounded() ? typed<double>(drift_) : nullptr, typed<Status>(status_));
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans update_centroids", dim3(1), dim3(kBlock));
    }

    // ---- initialisation (§3.4) ----
    std::vector<D> initial_centroids(std::uint64_t seed) {
        std::vector<D> c(km_elems(), D(INFINITY));
        const bool sampled = o_.init == KmeansInit::Random || o_.init == KmeansInit::KmeansPlusPlus;
        const DeviceSample sample = sampled ? init_sample_cuda(ctx_, valid_, o_, seed) : DeviceSample();
        const std::vector<double> init =
            o_.init == KmeansInit::KmeansPlusPlus
                ? kmeanspp_cuda(ctx_, image_, sample, plan_, seed)
                : simple_init(plan_, o_, sample.size, seed, [&](const std::vector<std::int64_t>& positions) {
                      return gather_pixels_cuda(ctx_, image_, sample.raster, positions);
                  });
        // (k-means++ may give fewer than k centres: the rest stay unset, +∞.)
        for (std::size_t i = 0; i < init.size(); ++i) c[i] = D(init[i]);
        return c;
    }

    // ---- Lloyd iterations ----
    void lloyd(std::vector<D>& c, std::vector<D>& prev, KmeansRun& info) {
        cent_.upload(ctx_, c.data(), km_elems() * sizeof(D));
        prev_.upload(ctx_, c.data(), km_elems() * sizeof(D));
        sums_.fill_bytes(ctx_, 0);
        counts_.fill_bytes(ctx_, 0);
        Status st{};
        st.rescan = 1;  // (bounded passes) the first pass scans every pixel
        status_.upload(ctx_, &st, sizeof(Status));
        if (bounded()) drift_.fill_bytes(ctx_, 0);
        const bool relocate = !o_.legacy && o_.empty == EmptyPolicy::Relocate;
        while (o_.max_iter > 0) {
            // A batch of iterations; those after convergence return at once.
            const int batch = std::min(16, o_.max_iter - st.iterations);
            for (int b = 0; b < batch; ++b) {
                launch_assign();
                launch_update(!relocate);
            }
            status_.download(ctx_, &st, sizeof(Status));
            if (st.stalled) {
                relocate_empty();
                st.stalled = 0;
                st.relocated = 1;  // (bounded passes) the moved pixels' labels are stale: rescan
                status_.upload(ctx_, &st, sizeof(Status));
                launch_update(true);
                status_.download(ctx_, &st, sizeof(Status));
            }
            if (st.done) break;
        }
        info.iterations = st.iterations;
        info.converged = st.converged != 0;
        if (o_.history && st.iterations > 0) {
            info.history.resize(std::size_t(st.iterations));
            history_.download(ctx_, info.history.data(), info.history.size() * sizeof(double));
        }
        cent_.download(ctx_, c.data(), km_elems() * sizeof(D));
        prev_.download(ctx_, prev.data(), km_elems() * sizeof(D));
    }

    // §3.7 with the CPU's selection code: device distances and ranking, the |E| farthest pixels'
    // values gathered, host choice (k-sized), sums patched.
    void relocate_empty() {
        std::vector<D> c(km_elems());
        cent_.download(ctx_, c.data(), c.size() * sizeof(D));
        std::vector<std::int64_t> sums(km_elems());
        std::vector<std::int64_t> counts(static_cast<std::size_t>(k_));
        sums_.download(ctx_, sums.data(), sums.size() * 8);
        counts_.download(ctx_, counts.data(), counts.size() * 8);
        std::vector<int> empty;
        for (int j = 0; j < k_; ++j)
            if (counts[std::size_t(j)] == 0) empty.push_back(j);
        DeviceBuffer d_near(ctx_, std::size_t(n()) * sizeof(D));
        const auto blocks = unsigned(div_up(n(), kBlock));
        nearest_distance<T, D><<<blocks, kBlock, 0, stream()>>>(px_, n(), k_, typed<const D>(cent_), typed<D>(d_near));
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans nearest_distance", dim3(blocks), dim3(kBlock));
        const std::vector<FarPixel> far =
            farthest_cuda(ctx_, d_near.data(), sizeof(D) == 8 ? DType::F64 : DType::F32, n(), empty.size());
        std::vector<std::int64_t> positions;
        for (const FarPixel& f : far) positions.push_back(f.index);
        const std::vector<double> values = gather_pixels_cuda(ctx_, image_, px_.idx, positions);
        for (std::size_t e = 0; e < far.size(); ++e)  // doubles give D(x) and q(x) exactly as T does
            relocate_pixel(values.data() + e * std::size_t(m_), c, k_, m_, empty[e], plan_.scale, sums, counts);
        sums_.upload(ctx_, sums.data(), sums.size() * 8);
        counts_.upload(ctx_, counts.data(), counts.size() * 8);
    }

    // ---- final pass and result ----
public:
    // Labels from prev when assign_prev (the seed's legacy arithmetic: the last assignment), else from c.
    Final final_pass(const std::vector<D>& c, const std::vector<D>& prev, bool want_labels, bool want_exact) {
        return final_pass(c, prev, want_labels, want_exact, o_.legacy);
    }
    Final final_pass(const std::vector<D>& c, const std::vector<D>& prev, bool want_labels, bool want_exact,
                     bool assign_prev) {
        Final f;
        cent_.upload(ctx_, c.data(), km_elems() * sizeof(D));
        prev_.upload(ctx_, prev.data(), km_elems() * sizeof(D));
        counts_.fill_bytes(ctx_, 0);
        exact_.fill_bytes(ctx_, 0);
        DeviceBuffer d_qpaint;
        if (want_exact) {
            std::vector<std::int64_t> q(km_elems());
            for (std::size_t i = 0; i < q.size(); ++i)
                q[i] = std::isinf(c[i]) ? 0 : km::to_fixed_scaled(double(c[i]), plan_.scale_d);
            d_qpaint = DeviceBuffer(ctx_, q.size() * 8);
            d_qpaint.upload(ctx_, q.data(), q.size() * 8);
        }
        const D* assign = assign_prev ? typed<const D>(prev_) : typed<const D>(cent_);
        const bool shared_counts = std::size_t(k_) * sizeof(unsigned) <= 32 * 1024;
        const std::size_t dyn = shared_counts ? std::size_t(k_) * sizeof(unsigned) : 0;
        if (colours_) {
            launch_final_colours(want_labels, want_exact ? typed<const std::int64_t>(d_qpaint) : nullptr, shared_counts, dyn);
        } else {
            auto* kernel = m_ == 3 ? &final_assign<T, D, 3> : &final_assign<T, D, 0>;
            // (the staged tiles and the counters together may pass 48 KB: opt in)
            CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dyn)));
            kernel<<<grid_, kBlock, dyn, stream()>>>(
                px_, n(), k_, assign, typed<const D>(cent_), want_exact ? typed<const std::int64_t>(d_qpaint) : nullptr,
                plan_.scale_d, want_labels ? labels_ : LabelsOut{}, typed<u64>(counts_),
                typed<double>(partials_), typed<u64>(exact_), shared_counts);
            CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans final_assign", dim3(grid_), dim3(kBlock));
        }
        f.counts.resize(std::size_t(k_));
        counts_.download(ctx_, f.counts.data(), f.counts.size() * 8);
        std::vector<double> partials(static_cast<std::size_t>(grid_));
        partials_.download(ctx_, partials.data(), partials.size() * sizeof(double));
        for (double p : partials) f.inertia += p;
        u64 ex[2];
        exact_.download(ctx_, ex, sizeof(ex));
        f.exact = read_i128(ex);
        return f;
    }

private:
    void finish(const std::vector<D>& c, const std::vector<D>& prev) {
        const Final f = final_pass(c, prev, /*labels=*/true, false);
        relabel_paint_device(finish_result(r_, c, f.counts, f.inertia, image_.dtype(), o_.legacy), r_.palette);
    }

    void relabel_paint_device(const std::vector<int>& new_label, const std::vector<double>& palette) {
        std::vector<T> pal(std::max<std::size_t>(palette.size(), 1));
        for (std::size_t i = 0; i < palette.size(); ++i) pal[i] = T(palette[i]);
        DeviceBuffer d_map(ctx_, new_label.size() * sizeof(int)), d_pal(ctx_, pal.size() * sizeof(T));
        d_map.upload(ctx_, new_label.data(), new_label.size() * sizeof(int));
        d_pal.upload(ctx_, pal.data(), pal.size() * sizeof(T));
        const auto blocks = unsigned(div_up(pixels_, kBlock));
        if constexpr (kColourType)
            if (colours_) {
                const auto cblocks = unsigned(div_up(ncolours_, kBlock));
                scatter_colour_labels<<<cblocks, kBlock, 0, stream()>>>(typed<const unsigned>(cbins_), ncolours_,
                                                                       typed<const int>(clabels_), typed<unsigned>(bins_));
                CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans scatter_colour_labels", dim3(cblocks), dim3(kBlock));
                relabel_paint_colours<<<blocks, kBlock, 0, stream()>>>(
                    labels_, pixels_, valid_.flags.empty() ? nullptr : typed<const std::uint8_t>(valid_.flags),
                    typed<const unsigned>(bins_), typed<const int>(d_map), typed<const T>(d_pal), x_, m_, quantized_);
                CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans relabel_paint_colours", dim3(blocks), dim3(kBlock));
                return;
            }
        const bool per_sample = m_ > 4;  // (then paint_samples paints, coalesced)
        relabel_paint<T><<<blocks, kBlock, 0, stream()>>>(
            labels_, pixels_, valid_.flags.empty() ? nullptr : typed<const std::uint8_t>(valid_.flags),
            typed<const int>(d_map), typed<const T>(d_pal), x_, m_, quantized_, !per_sample);
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans relabel_paint", dim3(blocks), dim3(kBlock));
        if (per_sample && quantized_.data) {
            const auto sblocks = unsigned(div_up(pixels_ * m_, kBlock));
            paint_samples<T><<<sblocks, kBlock, 0, stream()>>>(labels_, pixels_, m_, typed<const T>(d_pal), x_, quantized_);
            CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans paint_samples", dim3(sblocks), dim3(kBlock));
        }
    }

    const Context& ctx_;
    const CubeView& image_;
    const KmeansOptions& o_;
    KmeansResult& r_;
    const T* x_;  // dense BIP on the device
    int m_, k_;
    std::int64_t pixels_;
    LabelsOut labels_;
    PaintOut<T> quantized_;  // data = nullptr: nothing painted
    DeviceValidSet valid_;
    KmeansPlan plan_;
    Pixels<T> px_{};
    bool shared_ = true;
    int grid_ = 1;
    DeviceBuffer cent_, prev_, sums_, counts_, partials_, status_, history_, shift_, exact_;
    DeviceBuffer assigned_, bound_, drift_;  // bounded passes: label and stored bound per valid pixel, Δ
    bool tile_ = false;                      // tile mode: the scene's plan, plain passes
    bool colours_ = false;                   // the colour path: passes over the distinct colours
    DeviceBuffer bins_;                      // pixel count per colour bin, at the end bin → label
    DeviceBuffer cbins_, cpacked_, cweights_, clabels_;  // per colour: bin, samples, pixel count, final label
    std::int64_t ncolours_ = 0;
};

// A tile of a scene run in tiles (tiled.cpp) on the device: the engine above in tile mode over the
// tile's core (dense BIP on the context's device), with the scene's plan. Each pass makes its own
// engine (its valid set found again: a pass over the tile's flags, small beside the pass itself).
template <typename T, typename D>
class CudaTile final : public KmeansTile {
public:
    CudaTile(const Context& ctx, const CubeView& window, int x0, int y0, int scene_width, const KmeansOptions& options,
             const KmeansPlan& plan)
        : ctx_(ctx), bip_(ctx, window, Layout::BIP, Memory::Device), view_(bip_.view()), x0_(x0), y0_(y0),
          scene_width_(scene_width), o_(options), plan_(plan) {}

    std::vector<std::int64_t> row_valid() const override {
        return row_valid_cuda(ctx_, engine().valid_set(), width(), view_.height());
    }
    KmeansStats range() const override { return band_range_cuda(ctx_, view_, engine().valid_set()); }
    BandMoments moments() const override {
        return band_moments_cuda(ctx_, view_, engine().valid_set(), plan_.scale);
    }

    TilePixels sample(std::uint64_t seed, double rate, bool all, const std::vector<std::int64_t>& first_rank) const override {
        const auto e = engine();
        // The valid index of each row's first valid pixel.
        const std::vector<std::int64_t> rows = row_valid_cuda(ctx_, e.valid_set(), width(), view_.height());
        std::vector<std::int64_t> row_start(rows.size());
        std::int64_t at = 0;
        for (std::size_t r = 0; r < rows.size(); ++r) row_start[r] = at, at += rows[r];
        return sample_cuda(ctx_, view_, e.valid_set(), seed, rate, all, first_rank, row_start);
    }

    TileSums assign(const std::vector<double>& c) const override { return engine().tile_assign(centroids(c)); }

    TilePixels farthest(const std::vector<double>& c, std::size_t wanted) const override {
        auto e = engine();
        const auto [far, values] = e.tile_farthest(centroids(c), wanted);
        TilePixels out;
        out.set_doubles(values, view_.dtype());
        const DeviceValidSet& valid = e.valid_set();
        for (const FarPixel& f : far) {
            std::int64_t p = f.index;  // valid index → the tile's raster index
            if (!valid.index.empty())
                CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(&p, typed<const std::int64_t>(valid.index) + f.index, sizeof p,
                                                   cudaMemcpyDeviceToHost, stream_of(ctx_)));
            ctx_.synchronize();
            const std::int64_t x = x0_ + p % width(), y = y0_ + p / width();
            out.keys.push_back(FarPixel{y * scene_width_ + x, f.distance});
        }
        return out;
    }

    RestartStats final_pass(const std::vector<double>& assign, const std::vector<double>& paint,
                            const MutableCubeView& labels) const override {
        auto e = engine(labels);
        return e.final_pass(centroids(paint), centroids(assign), !labels.empty(), labels.empty(), assign != paint);
    }

    void relabel_paint(const MutableCubeView& labels, const std::vector<int>& new_label, const std::vector<double>& palette,
                       const MutableCubeView& quantized) const override {
        // The labels of the paint pass are the caller's, on the host: a device copy is relabelled.
        std::optional<DeviceCube> copy;
        if (!labels.on_device()) {
            copy.emplace(ctx_, CubeShape{labels.width(), labels.height(), 1, DType::I32, Layout::BSQ});
            copy_cube(ctx_, labels, copy->mutable_view());
        }
        auto e = engine(copy ? copy->mutable_view() : labels, quantized);
        e.tile_relabel_paint(new_label, palette);
        ctx_.synchronize();
    }

private:
    int width() const { return view_.width(); }
    static std::vector<D> centroids(const std::vector<double>& c) { return std::vector<D>(c.begin(), c.end()); }
    CudaKmeans<T, D> engine(const MutableCubeView& labels = {}, const MutableCubeView& quantized = {}) const {
        CudaKmeans<T, D> e(ctx_, view_, labels, quantized, o_, unused_);
        e.adopt(plan_);
        return e;
    }

    const Context& ctx_;
    CubeInLayout bip_;
    CubeView view_;  // the engines keep a reference to it
    int x0_, y0_, scene_width_;
    KmeansOptions o_;  // the scene's, with the mask cut to the tile
    KmeansPlan plan_;
    mutable KmeansResult unused_;  // the engine's result, which tile passes do not fill
};

}  // namespace

void kmeans_cuda(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                 const MutableCubeView& quantized, const KmeansOptions& options, KmeansResult& result) {
    visit_kmeans_types(image.dtype(), [&](auto t, auto d) {
        CudaKmeans<decltype(t), decltype(d)>(ctx, image, labels, quantized, options, result).run();
    });
}

bool kmeans_cuda_fits_shared(int k, int m, DType dtype) {
    const std::size_t d = dtype == DType::F64 ? 8 : 4;
    return shared_centroid_offset(k, m) + std::size_t(k) * std::size_t(m) * d + 16 <= kSharedLimit;
}

std::unique_ptr<KmeansTile> kmeans_tile_cuda(const Context& ctx, const CubeView& window, int x0, int y0, int scene_width,
                                             const KmeansOptions& options, const KmeansPlan& plan) {
    std::unique_ptr<KmeansTile> tile;
    visit_kmeans_types(window.dtype(), [&](auto t, auto d) {
        tile = std::make_unique<CudaTile<decltype(t), decltype(d)>>(ctx, window, x0, y0, scene_width, options, plan);
    });
    return tile;
}

}  // namespace cubekit::detail
