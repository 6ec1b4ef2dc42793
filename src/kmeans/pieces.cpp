// k-means over pieces a caller computes (kmeans.hpp, KmeansPieces; cubekit.dask.kmeans): the driver of
// tiled_driver.hpp runs in its own thread and, at each pass, hands its request out through next() and
// waits for the pieces' parts through feed(). Requests and parts cross as opaque CBOR bytes, so that
// Dask can ship them to its workers and back. The pieces run the context's tile: the CPU tile of
// cpu.cpp, or the CUDA tile of cuda.cu (host or device pieces, e.g. CuPy chunks).
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "cubekit/error.hpp"
#include "kmeans/tiled_driver.hpp"

namespace cubekit {
namespace {

using nlohmann::json;
using detail::km::i128;

json wide(i128 v) {
    const auto u = static_cast<unsigned __int128>(v);
    return json::array({std::uint64_t(u), std::uint64_t(u >> 64)});
}
i128 wide(const json& j) {
    return i128((static_cast<unsigned __int128>(j.at(1).get<std::uint64_t>()) << 64) | j.at(0).get<std::uint64_t>());
}

json plan_json(const detail::KmeansPlan& p) {
    return {{"k", p.k}, {"m", p.m}, {"pixels", p.pixels}, {"valid", p.valid}, {"float", p.float_input}, {"e", p.e},
            {"e_d", p.e_d}, {"scale", p.scale}, {"scale_d", p.scale_d}, {"tol", p.tol_abs}, {"lo", p.lo}, {"hi", p.hi}};
}
detail::KmeansPlan plan_from(const json& j) {
    detail::KmeansPlan p;
    p.k = j.at("k"), p.m = j.at("m"), p.pixels = j.at("pixels"), p.valid = j.at("valid"), p.float_input = j.at("float");
    p.e = j.at("e"), p.e_d = j.at("e_d"), p.scale = j.at("scale"), p.scale_d = j.at("scale_d"), p.tol_abs = j.at("tol");
    p.lo = j.at("lo").get<std::vector<double>>(), p.hi = j.at("hi").get<std::vector<double>>();
    return p;
}

std::string bytes_of(const json& j) {
    const std::vector<std::uint8_t> b = json::to_cbor(j);
    return std::string(b.begin(), b.end());
}
json json_of(const std::string& bytes, const char* what) {
    try {
        return json::from_cbor(bytes);
    } catch (const json::exception&) {
        throw InvalidInput(std::string("kmeans pieces: ") + what + " is not a k-means request or part");
    }
}

std::string request_bytes(const detail::KmeansRequest& r, int width) {
    json ranks = json::array();
    for (const auto& [c, v] : r.first_rank) ranks.push_back({c.first, c.second, v});
    return bytes_of({{"pass", int(r.pass)}, {"width", width}, {"plan", plan_json(r.plan)}, {"a", r.a}, {"p", r.p},
                     {"seed", r.seed}, {"rate", r.rate}, {"all", r.all}, {"wanted", r.wanted}, {"first_rank", ranks},
                     {"new_label", r.new_label}});
}
detail::KmeansRequest request_from(const json& j) {
    detail::KmeansRequest r;
    r.pass = detail::KmeansPass(j.at("pass").get<int>());
    r.plan = plan_from(j.at("plan"));
    r.a = j.at("a").get<std::vector<double>>(), r.p = j.at("p").get<std::vector<double>>();
    r.seed = j.at("seed"), r.rate = j.at("rate"), r.all = j.at("all"), r.wanted = j.at("wanted");
    for (const json& e : j.at("first_rank")) r.first_rank[{e.at(0), e.at(1)}] = e.at(2).get<std::vector<std::int64_t>>();
    r.new_label = j.at("new_label").get<std::vector<int>>();
    return r;
}

json pixels_json(const detail::TilePixels& p) {
    json keys = json::array();
    for (const detail::FarPixel& f : p.keys) keys.push_back({f.index, f.distance});
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(p.values.data());
    return {{"keys", keys}, {"dtype", dtype_name(p.dtype)},
            {"values", json::binary(std::vector<std::uint8_t>(bytes, bytes + p.values.size()))}};
}
detail::TilePixels pixels_from(const json& j) {
    detail::TilePixels p;
    for (const json& k : j.at("keys")) p.keys.push_back({k.at(0).get<std::int64_t>(), k.at(1).get<double>()});
    p.dtype = parse_dtype(j.at("dtype").get<std::string>());
    const auto& bytes = j.at("values").get_binary();
    p.values.resize(bytes.size());
    if (!bytes.empty()) std::memcpy(p.values.data(), bytes.data(), bytes.size());  // (no null pointer to memcpy)
    return p;
}

std::string part_bytes(const detail::KmeansPart& p) {
    json q2 = json::array();
    for (const i128 v : p.moments.sum_q2) q2.push_back(wide(v));
    return bytes_of({{"corner", {p.corner.first, p.corner.second}},
                     {"rows", p.row_valid},
                     {"valid", p.stats.valid},
                     {"lo", p.stats.lo},
                     {"hi", p.stats.hi},
                     {"q", p.moments.sum_q},
                     {"q2", q2},
                     {"pixels", pixels_json(p.pixels)},
                     {"sums", p.sums.sums},
                     {"counts", p.sums.counts},
                     {"inertia", p.sums.inertia},
                     {"final_counts", p.final.counts},
                     {"final_inertia", p.final.inertia},
                     {"exact", wide(p.final.exact)}});
}
detail::KmeansPart part_from(const json& j) {
    detail::KmeansPart p;
    p.corner = {j.at("corner").at(0), j.at("corner").at(1)};
    p.row_valid = j.at("rows").get<std::vector<std::int64_t>>();
    p.stats.valid = j.at("valid"), p.stats.lo = j.at("lo").get<std::vector<double>>();
    p.stats.hi = j.at("hi").get<std::vector<double>>();
    p.moments.sum_q = j.at("q").get<std::vector<std::int64_t>>();
    for (const json& v : j.at("q2")) p.moments.sum_q2.push_back(wide(v));
    p.pixels = pixels_from(j.at("pixels"));
    p.sums.sums = j.at("sums").get<std::vector<std::int64_t>>();
    p.sums.counts = j.at("counts").get<std::vector<std::int64_t>>();
    p.sums.inertia = j.at("inertia");
    p.final.counts = j.at("final_counts").get<std::vector<std::uint64_t>>();
    p.final.inertia = j.at("final_inertia"), p.final.exact = wide(j.at("exact"));
    return p;
}

// A piece as the context's tile sees it (CPU: read in place; CUDA: a device copy in BIP, from host or
// device memory), with the request's plan.
std::unique_ptr<detail::KmeansTile> piece_tile(const Context& ctx, const CubeView& piece, int x0, int y0,
                                               const std::vector<std::uint8_t>& mask, const detail::KmeansRequest& r,
                                               int width, const char* who) {
    if (piece.on_device() && !ctx.is_cuda())
        throw InvalidInput(std::string(who) + ": the piece is in device memory but the context runs on the CPU");
    if (piece.bands() != r.plan.m && r.pass != detail::KmeansPass::Range)
        throw InvalidInput(std::string(who) + ": the piece has " + std::to_string(piece.bands()) + " bands; the scene " +
                           std::to_string(r.plan.m));
    if (!mask.empty() && mask.size() != piece.num_pixels())
        throw InvalidInput(std::string(who) + ": the mask has " + std::to_string(mask.size()) + " values; the piece " +
                           std::to_string(piece.num_pixels()) + " pixels");
    const KmeansOptions o = detail::piece_options(r.plan.k, mask);
    return ctx.is_cuda() ? detail::kmeans_tile_cuda(ctx, piece, x0, y0, width, o, r.plan)
                         : detail::kmeans_tile_cpu(ctx, piece, x0, y0, width, o, r.plan);
}

}  // namespace

struct KmeansPieces::State {
    std::mutex mutex;
    std::condition_variable changed;
    std::optional<std::string> request;         // the pass waiting for its parts
    std::optional<std::vector<std::string>> parts;
    bool done = false, stopping = false;
    std::exception_ptr error;
    KmeansResult result;
    std::string labelling;
    std::thread driver;
};

KmeansPieces::KmeansPieces(const Context& ctx, int width, int height, int bands, DType dtype, const KmeansOptions& options)
    : state_(std::make_unique<State>()) {
    check_kmeans_arguments(CubeShape{width, height, bands, dtype, Layout::BIP}, options);
    if (ctx.is_cuda()) throw InvalidInput("KmeansPieces: k-means pieces run on the CPU backend only for now");
    State& s = *state_;
    s.driver = std::thread([&s, &ctx, width, height, bands, dtype, options] {
        const detail::PassRunner run_pass = [&](const detail::KmeansRequest& r,
                                                const std::function<void(detail::KmeansPart&&)>& merge) {
            std::vector<std::string> parts;
            {
                std::unique_lock lock(s.mutex);
                s.request = request_bytes(r, width);
                s.changed.notify_all();
                s.changed.wait(lock, [&] { return s.parts.has_value() || s.stopping; });
                if (s.stopping) throw Cancelled("kmeans: the pieces run was abandoned");
                parts = std::move(*s.parts);
                s.parts.reset();
            }
            for (const std::string& p : parts) merge(part_from(json_of(p, "a part")));
        };
        try {
            detail::KmeansRequest labelling;
            detail::run_kmeans_pieces(ctx, width, height, bands, dtype, options, run_pass, s.result, labelling);
            const std::lock_guard lock(s.mutex);
            s.labelling = request_bytes(labelling, width);
        } catch (...) {
            const std::lock_guard lock(s.mutex);
            s.error = std::current_exception();
        }
        const std::lock_guard lock(s.mutex);
        s.done = true;
        s.changed.notify_all();
    });
}

KmeansPieces::~KmeansPieces() {
    {
        const std::lock_guard lock(state_->mutex);
        state_->stopping = true;
        state_->changed.notify_all();
    }
    state_->driver.join();
}

std::optional<std::string> KmeansPieces::next() {
    State& s = *state_;
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return (s.request.has_value() && !s.parts.has_value()) || s.done; });
    if (s.error) std::rethrow_exception(s.error);
    if (s.done) return std::nullopt;
    return s.request;
}

void KmeansPieces::feed(std::vector<std::string> parts) {
    State& s = *state_;
    const std::lock_guard lock(s.mutex);
    if (!s.request || s.parts) throw InvalidInput("KmeansPieces::feed: no pass is waiting for parts (call next() first)");
    s.request.reset();
    s.parts = std::move(parts);
    s.changed.notify_all();
}

KmeansResult KmeansPieces::result() {
    State& s = *state_;
    std::unique_lock lock(s.mutex);
    if (!s.done) throw InvalidInput("KmeansPieces::result: the run is not done (call next() until it returns nothing)");
    if (s.error) std::rethrow_exception(s.error);
    return std::move(s.result);
}

std::string KmeansPieces::labelling() const {
    const std::lock_guard lock(state_->mutex);
    return state_->labelling;
}

std::string kmeans_piece(const Context& ctx, const CubeView& piece, int x0, int y0, const std::vector<std::uint8_t>& mask,
                         const std::string& request) {
    const json j = json_of(request, "the request");
    const detail::KmeansRequest r = request_from(j);
    const auto tile = piece_tile(ctx, piece, x0, y0, mask, r, j.at("width"), "kmeans_piece");
    return part_bytes(detail::compute_part(*tile, {y0, x0}, r));
}

void kmeans_piece_labels(const Context& ctx, const CubeView& piece, int x0, int y0, const std::vector<std::uint8_t>& mask,
                         const std::string& labelling, const MutableCubeView& labels) {
    const json j = json_of(labelling, "the labelling");
    const detail::KmeansRequest r = request_from(j);
    if (r.pass != detail::KmeansPass::Labels) throw InvalidInput("kmeans_piece_labels: expected KmeansPieces::labelling()");
    if ((labels.on_device() && !ctx.is_cuda()) || labels.width() != piece.width() || labels.height() != piece.height() ||
        labels.bands() != 1 || labels.dtype() != DType::I32)
        throw InvalidInput("kmeans_piece_labels: labels is " + labels.describe() + "; expected " +
                           std::to_string(piece.width()) + "x" + std::to_string(piece.height()) + "x1 i32 in " +
                           (ctx.is_cuda() ? "host or device memory" : "host memory"));
    const auto tile = piece_tile(ctx, piece, x0, y0, mask, r, j.at("width"), "kmeans_piece_labels");
    // The CUDA tile writes device labels: host labels get them through a device copy.
    std::optional<DeviceCube> on_device;
    if (ctx.is_cuda() && !labels.on_device())
        on_device.emplace(ctx, CubeShape{labels.width(), labels.height(), 1, DType::I32, Layout::BSQ});
    const MutableCubeView target = on_device ? on_device->mutable_view() : labels;
    tile->final_pass(r.a, r.p, target);
    tile->relabel_paint(target, r.new_label, {}, MutableCubeView{});
    if (on_device) copy_cube(ctx, on_device->view(), labels);
    ctx.synchronize();
}

}  // namespace cubekit
