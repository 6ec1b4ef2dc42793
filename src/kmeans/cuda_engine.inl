// Host side of the CUDA k-means (included by cuda.cu after the kernels): the run's control flow.
// Everything that chooses (the plan, the init sample, k-means++ candidates, relocation, the sort)
// is the CPU reference's own host code, fed with exact integers or bit-identical distances.

namespace cubekit::detail {
namespace {

template <typename X>
X* typed(DeviceBuffer& b) { return static_cast<X*>(b.data()); }

template <typename T, typename D>
class CudaKmeans {
public:
    CudaKmeans(const Context& ctx, const Cube& bip, const DeviceBuffer* resident, const KmeansOptions& o,
               KmeansResult& r, KmeansCudaTimes* times)
        : ctx_(ctx), bip_(bip), resident_(resident), o_(o), r_(r), times_(times), x_(bip.data<T>()), m_(bip.bands()),
          k_(o.k), pixels_(std::int64_t(bip.shape().num_pixels())) {}

    void run() {
        auto t0 = std::chrono::steady_clock::now();
        plan_ = prepare_kmeans(bip_, o_, ctx_.threads(), valid_);
        r_.valid_pixels = n();
        if (!resident_) {
            own_x_ = DeviceBuffer(ctx_, bip_.shape().num_bytes());
            own_x_.upload(ctx_, x_, bip_.shape().num_bytes());
        }
        if (n() < pixels_) {
            idx_ = DeviceBuffer(ctx_, valid_.size() * sizeof(std::int64_t));
            idx_.upload(ctx_, valid_.data(), valid_.size() * sizeof(std::int64_t));
        }
        px_ = Pixels<T>{d_x(), n() < pixels_ ? typed<const std::int64_t>(idx_) : nullptr, m_};
        allocate();
        std::vector<D> best, best_prev;
        i128 best_exact = 0;
        for (int run = 0; run < o_.n_init; ++run) {
            ctx_.check_cancelled("kmeans");
            KmeansRun info;
            info.seed = o_.seed + std::uint64_t(run);
            const auto ti = std::chrono::steady_clock::now();
            std::vector<D> c = initial_centroids(info.seed);
            const auto tl = std::chrono::steady_clock::now();
            std::vector<D> prev = c;
            lloyd(c, prev, info);
            const auto tf = std::chrono::steady_clock::now();
            if (times_) {
                times_->init_ms += ms(ti, tl);
                times_->lloyd_ms += ms(tl, tf);
            }
            // With restarts each one's final statistics choose the winner; with one run the
            // labelling pass in finish() gives them (no second pass).
            if (o_.n_init > 1) {
                const Final f = final_pass(c, prev, /*labels=*/false, true);
                info.inertia = f.inertia;
                info.k_effective = int(std::count_if(f.counts.begin(), f.counts.end(), [](auto n) { return n > 0; }));
                if (r_.restarts.empty() || f.exact < best_exact) {
                    best_exact = f.exact;
                    best = c;
                    best_prev = prev;
                    r_.winner = int(r_.restarts.size());
                }
            } else {
                best = c;
                best_prev = prev;
            }
            r_.restarts.push_back(std::move(info));
            ctx_.progress(std::size_t(run + 1), std::size_t(o_.n_init));
        }
        const auto tf = std::chrono::steady_clock::now();
        finish(best, best_prev);
        if (times_) {
            times_->final_ms += ms(tf, std::chrono::steady_clock::now());
            times_->total_ms += ms(t0, std::chrono::steady_clock::now());
        }
    }

private:
    struct Final {
        std::vector<std::uint64_t> counts;
        double inertia = 0;
        i128 exact = 0;
    };

    static double ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
    }
    std::int64_t n() const { return std::int64_t(valid_.size()); }
    const T* d_x() const {
        return static_cast<const T*>(resident_ ? resident_->data() : own_x_.data());
    }
    cudaStream_t stream() const { return stream_of(ctx_); }
    const T* raster(std::int64_t p) const { return x_ + p * m_; }
    std::size_t km_elems() const { return std::size_t(k_) * std::size_t(m_); }
    // + 16: for 3 bands nvcc loads a centroid with one 16-byte LDS.128 (3 values and the next
    // centroid's first), which reads 4 bytes past the last centroid.
    std::size_t shared_bytes() const { return shared_centroid_offset(k_, m_) + km_elems() * sizeof(D) + 16; }

    void allocate() {
        shared_ = shared_bytes() <= kSharedLimit;
        int sms = 0, per_sm = 0;
        CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx_.device()));
        const void* kernel = assign_kernel();
        const std::size_t dyn = shared_ ? shared_bytes() : 0;
        // Static shared memory (the staged tiles) and dynamic together may pass 48 KB: opt in.
        CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dyn)));
        CUBEKIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, dyn));
        grid_ = int(std::max<std::int64_t>(1, std::min<std::int64_t>((n() + kBlock - 1) / kBlock,
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
    }

    const void* assign_kernel() const {
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
            o_.history ? typed<double>(history_) : nullptr, typed<double>(shift_), typed<Status>(status_));
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans update_centroids", dim3(1), dim3(kBlock));
    }

    // ---- initialisation ----
    std::vector<D> initial_centroids(std::uint64_t seed) {
        std::vector<D> c(km_elems(), D(INFINITY));
        const bool sampled = o_.init == KmeansInit::Random || o_.init == KmeansInit::KmeansPlusPlus;
        const std::vector<std::int64_t> sample =
            sampled ? init_sample_pixels(valid_, o_, seed, ctx_.threads()) : std::vector<std::int64_t>();
        if (o_.init == KmeansInit::KmeansPlusPlus) {
            kmeanspp(seed, sample, c);
            return c;
        }
        const std::vector<double> init = simple_init(bip_, plan_, o_, sample, seed);
        for (std::size_t i = 0; i < c.size(); ++i) c[i] = D(init[i]);
        return c;
    }

    void fixed_of(std::int64_t p, std::int64_t* q) const {
        for (int b = 0; b < m_; ++b) q[b] = km::to_fixed_scaled(double(raster(p)[b]), plan_.scale_d);
    }

    // Greedy k-means++ (§3.4): the weight passes on the device, the choices on the host from the
    // exact integer sums (the CPU reference's arithmetic).
    void kmeanspp(std::uint64_t seed, const std::vector<std::int64_t>& sample, std::vector<D>& c) {
        const auto ns = std::int64_t(sample.size());
        const int trials = kmeanspp_trials(k_);
        const int blocks = int((ns + kBlock - 1) / kBlock);
        DeviceBuffer d_sample(ctx_, sample.size() * sizeof(std::int64_t));
        d_sample.upload(ctx_, sample.data(), sample.size() * sizeof(std::int64_t));
        DeviceBuffer d_dist(ctx_, sample.size() * sizeof(i128)), d_bsum(ctx_, std::size_t(blocks) * sizeof(i128));
        DeviceBuffer d_qc(ctx_, std::size_t(m_) * 8), d_qcand(ctx_, std::size_t(trials) * m_ * 8);
        DeviceBuffer d_phi(ctx_, std::size_t(trials) * 2 * sizeof(u64));
        std::vector<std::int64_t> qc(static_cast<std::size_t>(m_)), qcand(std::size_t(trials) * m_);
        std::vector<i128> bsum(static_cast<std::size_t>(blocks)), chunk(kBlock);
        std::vector<u64> phi(std::size_t(trials) * 2);
        std::vector<std::int64_t> cand(static_cast<std::size_t>(trials));
        auto set_centre = [&](int j, std::int64_t s) {
            for (int b = 0; b < m_; ++b) c[std::size_t(j) * m_ + b] = D(raster(sample[std::size_t(s)])[b]);
        };
        auto distance_pass = [&](bool first) {
            d_qc.upload(ctx_, qc.data(), qc.size() * 8);
            kpp_distance<T><<<blocks, kBlock, 0, stream()>>>(d_x(), typed<const std::int64_t>(d_sample), ns, m_,
                                                             typed<const std::int64_t>(d_qc), plan_.scale_d, first,
                                                             typed<i128>(d_dist), typed<i128>(d_bsum));
            CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans++ kpp_distance", dim3(blocks), dim3(kBlock));
        };
        const auto first = std::int64_t(km::scaled_index(km::draw53(seed, 1, 0), std::uint64_t(ns)));
        set_centre(0, first);
        fixed_of(sample[std::size_t(first)], qc.data());
        distance_pass(true);
        for (int t = 1; t < k_; ++t) {
            ctx_.check_cancelled("kmeans++");
            d_bsum.download(ctx_, bsum.data(), bsum.size() * sizeof(i128));
            std::vector<i128> prefix(bsum.size());
            i128 phi_total = 0;
            for (std::size_t b = 0; b < bsum.size(); ++b) prefix[b] = phi_total += bsum[b];
            if (phi_total == 0) return;  // only t distinct vectors in the sample: the rest stay unset
            for (int l = 0; l < trials; ++l) {
                const i128 thr = km::scaled_threshold(km::draw53(seed, 2, std::uint64_t(t) * trials + l), phi_total);
                // First position with inclusive prefix > thr: its block, then within the block.
                const auto b = std::size_t(std::upper_bound(prefix.begin(), prefix.end(), thr) - prefix.begin());
                const std::int64_t start = std::int64_t(b) * kBlock;
                const auto len = std::size_t(std::min<std::int64_t>(kBlock, ns - start));
                CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(chunk.data(), typed<i128>(d_dist) + start, len * sizeof(i128),
                                                   cudaMemcpyDeviceToHost, stream()));
                CUBEKIT_CUDA_CHECK(cudaStreamSynchronize(stream()));
                i128 p = b == 0 ? 0 : prefix[b - 1];
                std::size_t at = 0;
                while (at + 1 < len && (p += chunk[at]) <= thr) ++at;
                cand[std::size_t(l)] = start + std::int64_t(at);
                fixed_of(sample[std::size_t(cand[std::size_t(l)])], qcand.data() + std::size_t(l) * m_);
            }
            d_qcand.upload(ctx_, qcand.data(), qcand.size() * 8);
            d_phi.fill_bytes(ctx_, 0);
            kpp_trials<T><<<blocks, kBlock, 0, stream()>>>(d_x(), typed<const std::int64_t>(d_sample), ns, m_,
                                                           typed<const std::int64_t>(d_qcand), trials, plan_.scale_d,
                                                           typed<const i128>(d_dist), typed<u64>(d_phi));
            CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans++ kpp_trials", dim3(blocks), dim3(kBlock));
            d_phi.download(ctx_, phi.data(), phi.size() * sizeof(u64));
            int best = 0;
            for (int l = 1; l < trials; ++l)
                if (read_i128(&phi[std::size_t(2 * l)]) < read_i128(&phi[std::size_t(2 * best)])) best = l;
            set_centre(t, cand[std::size_t(best)]);
            std::copy_n(qcand.begin() + std::ptrdiff_t(best) * m_, m_, qc.begin());
            distance_pass(false);
        }
    }

    // ---- Lloyd iterations ----
    void lloyd(std::vector<D>& c, std::vector<D>& prev, KmeansRun& info) {
        cent_.upload(ctx_, c.data(), km_elems() * sizeof(D));
        prev_.upload(ctx_, c.data(), km_elems() * sizeof(D));
        sums_.fill_bytes(ctx_, 0);
        counts_.fill_bytes(ctx_, 0);
        status_.fill_bytes(ctx_, 0);
        Status st{};
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

    // §3.7 with the CPU's selection code: device distances, host choice, sums patched.
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
        const int blocks = int((n() + kBlock - 1) / kBlock);
        nearest_distance<T, D><<<blocks, kBlock, 0, stream()>>>(px_, n(), k_, typed<const D>(cent_), typed<D>(d_near));
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans nearest_distance", dim3(blocks), dim3(kBlock));
        std::vector<D> near(static_cast<std::size_t>(n()));
        d_near.download(ctx_, near.data(), near.size() * sizeof(D));
        std::vector<FarPixel> cand(near.size());
        for (std::size_t i = 0; i < near.size(); ++i) cand[i] = FarPixel{std::int64_t(i), double(near[i])};
        const std::vector<FarPixel> far = farthest(std::move(cand), empty.size());
        for (std::size_t e = 0; e < far.size(); ++e) {
            const T* x = raster(valid_[std::size_t(far[e].index)]);
            D d;
            const int from = km::nearest(x, c.data(), k_, m_, d);
            const int to = empty[e];
            --counts[std::size_t(from)];
            counts[std::size_t(to)] = 1;
            for (int b = 0; b < m_; ++b) {
                const std::int64_t q = km::sum_value(x[b], plan_.scale);
                sums[std::size_t(from) * m_ + b] -= q;
                sums[std::size_t(to) * m_ + b] = q;
            }
        }
        sums_.upload(ctx_, sums.data(), sums.size() * 8);
        counts_.upload(ctx_, counts.data(), counts.size() * 8);
    }

    // ---- final pass and result ----
    Final final_pass(const std::vector<D>& c, const std::vector<D>& prev, bool want_labels, bool want_exact) {
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
        if (want_labels) {
            labels_ = DeviceBuffer(ctx_, std::size_t(pixels_) * sizeof(std::int32_t));
            labels_.fill_bytes(ctx_, 0xFF);  // −1 for excluded pixels
        }
        const D* assign = o_.legacy ? typed<const D>(prev_) : typed<const D>(cent_);
        const bool shared_counts = std::size_t(k_) * sizeof(unsigned) <= 32 * 1024;
        const std::size_t dyn = shared_counts ? std::size_t(k_) * sizeof(unsigned) : 0;
        auto* kernel = m_ == 3 ? &final_assign<T, D, 3> : &final_assign<T, D, 0>;
        kernel<<<grid_, kBlock, dyn, stream()>>>(
            px_, n(), k_, assign, typed<const D>(cent_), want_exact ? typed<const std::int64_t>(d_qpaint) : nullptr,
            plan_.scale_d, want_labels ? typed<std::int32_t>(labels_) : nullptr, typed<u64>(counts_),
            typed<double>(partials_), typed<u64>(exact_), shared_counts);
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans final_assign", dim3(grid_), dim3(kBlock));
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

    void finish(const std::vector<D>& c, const std::vector<D>& prev) {
        const Final f = final_pass(c, prev, /*labels=*/true, false);
        const KmeansRun& win = r_.restarts[std::size_t(r_.winner)];
        r_.inertia = f.inertia;
        r_.restarts[std::size_t(r_.winner)].inertia = f.inertia;
        r_.iterations = win.iterations;
        r_.converged = win.converged;
        r_.history = win.history;
        const std::vector<double> cd(c.begin(), c.end());
        const std::vector<int> new_label = sort_result(r_, cd, f.counts, bip_.dtype(), o_.legacy);
        r_.restarts[std::size_t(r_.winner)].k_effective = r_.k_effective;
        std::vector<T> pal(r_.palette.size());
        for (std::size_t i = 0; i < pal.size(); ++i) pal[i] = T(r_.palette[i]);
        DeviceBuffer d_map(ctx_, new_label.size() * sizeof(int)), d_pal(ctx_, pal.size() * sizeof(T));
        d_map.upload(ctx_, new_label.data(), new_label.size() * sizeof(int));
        d_pal.upload(ctx_, pal.data(), pal.size() * sizeof(T));
        if (o_.paint) {
            quantized_ = DeviceBuffer(ctx_, bip_.shape().num_bytes());
            CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(quantized_.data(), d_x(), bip_.shape().num_bytes(),
                                               cudaMemcpyDeviceToDevice, stream()));
        }
        const int blocks = int((pixels_ + kBlock - 1) / kBlock);
        relabel_paint<T><<<blocks, kBlock, 0, stream()>>>(typed<std::int32_t>(labels_), pixels_,
                                                          typed<const int>(d_map), typed<const T>(d_pal), m_,
                                                          o_.paint ? typed<T>(quantized_) : nullptr);
        CUBEKIT_CHECK_LAUNCH(ctx_, "kmeans relabel_paint", dim3(blocks), dim3(kBlock));
        if (times_ && times_->keep_on_device) {
            CUBEKIT_CUDA_CHECK(cudaStreamSynchronize(stream()));
            return;
        }
        r_.labels.resize(std::size_t(pixels_));
        labels_.download(ctx_, r_.labels.data(), r_.labels.size() * sizeof(std::int32_t));
        if (o_.paint) {
            r_.quantized = Cube(bip_.width(), bip_.height(), m_, bip_.dtype(), Layout::BIP);
            quantized_.download(ctx_, r_.quantized.template data<T>(), bip_.shape().num_bytes());
            r_.quantized.metadata() = bip_.metadata();
        }
    }

    const Context& ctx_;
    const Cube& bip_;
    const DeviceBuffer* resident_;
    const KmeansOptions& o_;
    KmeansResult& r_;
    KmeansCudaTimes* times_;
    const T* x_;
    int m_, k_;
    std::int64_t pixels_;
    std::vector<std::int64_t> valid_;
    KmeansPlan plan_;
    Pixels<T> px_{};
    bool shared_ = true;
    int grid_ = 1;
    DeviceBuffer own_x_, idx_, cent_, prev_, sums_, counts_, partials_, status_, history_, shift_, exact_, labels_,
        quantized_;
};

template <typename F>
void with_types(DType t, F&& f) {
    visit_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        using D = std::conditional_t<std::is_same_v<T, double>, double, float>;
        f(T{}, D{});
    });
}

}  // namespace

void kmeans_cuda(const Context& ctx, const Cube& image, const KmeansOptions& options, KmeansResult& result) {
    with_types(image.dtype(), [&](auto t, auto d) {
        CudaKmeans<decltype(t), decltype(d)>(ctx, image, nullptr, options, result, nullptr).run();
    });
}

void kmeans_cuda_resident(const Context& ctx, const Cube& bip, const DeviceBuffer& d_bip, const KmeansOptions& options,
                          KmeansResult& result, KmeansCudaTimes& times) {
    with_types(bip.dtype(), [&](auto t, auto d) {
        CudaKmeans<decltype(t), decltype(d)>(ctx, bip, &d_bip, options, result, &times).run();
    });
}

bool kmeans_cuda_fits_shared(int k, int m, DType dtype) {
    const std::size_t d = dtype == DType::F64 ? 8 : 4;
    return shared_centroid_offset(k, m) + std::size_t(k) * std::size_t(m) * d + 16 <= kSharedLimit;
}

}  // namespace cubekit::detail
