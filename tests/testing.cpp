#include "testing.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

namespace cubekit::testing {

std::uint64_t test_seed() {
    if (const char* env = std::getenv("CUBEKIT_TEST_SEED")) return std::strtoull(env, nullptr, 10);
    static std::atomic<std::uint64_t> counter{0};
    std::random_device rd;
    return (std::uint64_t(rd()) << 32) ^ rd() ^ counter.fetch_add(1);
}

Cube random_cube(int width, int height, int bands, DType dtype, std::uint64_t seed, double lo, double hi, Layout layout) {
    Cube cube(width, height, bands, dtype, layout);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int b = 0; b < bands; ++b)
        for (int y = 0; y < height; ++y)
            for (int x = 0; x < width; ++x) cube.set_value(x, y, b, dist(rng));
    return cube;
}

Cube random_levels_cube(int width, int height, int bands, DType dtype, std::uint64_t seed, int levels, Layout layout) {
    Cube cube(width, height, bands, dtype, layout);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> dist(0, levels - 1);
    for (int b = 0; b < bands; ++b)
        for (int y = 0; y < height; ++y)
            for (int x = 0; x < width; ++x) cube.set_value(x, y, b, double(dist(rng)));
    return cube;
}

const Context& cpu_context() {
    static const Context ctx({.backend = Backend::Cpu});
    return ctx;
}

const Context* cuda_context() {
    static const std::unique_ptr<Context> ctx = []() -> std::unique_ptr<Context> {
        if (Context::cuda_device_count() == 0) return nullptr;
        return std::make_unique<Context>(ContextOptions{.backend = Backend::Cuda});
    }();
    return ctx.get();
}

std::vector<int> devices_twice_or_all() {
    std::vector<int> devices;
    for (int i = 0; i < Context::cuda_device_count(); ++i) devices.push_back(i);
    if (devices.size() == 1) devices.push_back(devices[0]);
    return devices;
}

std::filesystem::path source_path(const std::string& relative) { return std::filesystem::path(CUBEKIT_SOURCE_DIR) / relative; }

std::optional<std::filesystem::path> shared_data_path(const std::string& relative) {
    const char* env = std::getenv("CUBEKIT_SHARED_DATA");
    const std::filesystem::path root = env ? std::filesystem::path(env) : std::filesystem::path(CUBEKIT_SHARED_DATA);
    const std::filesystem::path p = root / relative;
    if (std::filesystem::exists(p)) return p;
    return std::nullopt;
}

std::vector<SceneFile> hyperspectral_scenes() {
    std::vector<SceneFile> found = {{source_path("data/samson/samson_1.img"), ""}};
    const SceneFile shared[] = {
        {"envi/samson/samson_1.img", ""},          {"envi/jasper_ridge/jasperRidge2_R198.img", ""},
        {"target_detection/Sandiego.mat", "data"}, {"target_detection/HYDICE.mat", "data"},
        {"anomaly_abu/abu-airport-1.mat", "data"}, {"anomaly_abu/abu-airport-2.mat", "data"},
        {"anomaly_abu/abu-airport-3.mat", "data"}, {"anomaly_abu/abu-airport-4.mat", "data"},
        {"anomaly_abu/abu-beach-1.mat", "data"},   {"anomaly_abu/abu-beach-2.mat", "data"},
        {"anomaly_abu/abu-beach-3.mat", "data"},   {"anomaly_abu/hydice.mat", "data"},
        {"anomaly_abu/sandiego.mat", "data"}};
    for (const SceneFile& s : shared)
        if (auto p = shared_data_path(s.path.string())) found.push_back({*p, s.var});
    return found;
}

std::vector<std::filesystem::path> shared_photos(const std::string& folder) {
    std::vector<std::filesystem::path> found;
    const auto dir = shared_data_path(folder);
    if (!dir) return found;
    for (const auto& entry : std::filesystem::directory_iterator(*dir)) {
        const std::string ext = entry.path().extension().string();
        if (ext == ".png" || ext == ".jpg" || ext == ".jpeg") found.push_back(entry.path());
    }
    std::sort(found.begin(), found.end());
    return found;
}

namespace {
std::string describe_sample(const Cube& c, int x, int y, int b) {
    std::ostringstream s;
    s.precision(17);
    s << c.value(x, y, b);
    return s.str();
}
::testing::AssertionResult same_shape(const Cube& e, const Cube& a) {
    if (e.width() != a.width() || e.height() != a.height() || e.bands() != a.bands() || e.dtype() != a.dtype())
        return ::testing::AssertionFailure() << "shapes differ: expected " << e.shape().describe() << ", got "
                                             << a.shape().describe();
    return ::testing::AssertionSuccess();
}
}  // namespace

::testing::AssertionResult cubes_identical(const Cube& expected, const Cube& actual) {
    if (auto r = same_shape(expected, actual); !r) return r;
    const std::size_t esize = dtype_size(expected.dtype());
    std::size_t differing = 0;
    int fx = -1, fy = -1, fb = -1;
    for (int b = 0; b < expected.bands(); ++b)
        for (int y = 0; y < expected.height(); ++y)
            for (int x = 0; x < expected.width(); ++x) {
                const std::byte* pe = expected.bytes() + expected.shape().offset(x, y, b) * esize;
                const std::byte* pa = actual.bytes() + actual.shape().offset(x, y, b) * esize;
                if (std::memcmp(pe, pa, esize) != 0) {
                    if (differing++ == 0) fx = x, fy = y, fb = b;
                }
            }
    if (differing == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << differing << " of " << expected.num_elements()
                                         << " samples differ; first at (x=" << fx << ", y=" << fy << ", b=" << fb
                                         << "): expected " << describe_sample(expected, fx, fy, fb) << ", got "
                                         << describe_sample(actual, fx, fy, fb);
}

::testing::AssertionResult cubes_close(const Cube& expected, const Cube& actual, double rel, double floor) {
    if (auto r = same_shape(expected, actual); !r) return r;
    std::size_t bad = 0;
    double worst = 0;
    int wx = 0, wy = 0, wb = 0;
    for (int b = 0; b < expected.bands(); ++b)
        for (int y = 0; y < expected.height(); ++y)
            for (int x = 0; x < expected.width(); ++x) {
                const double e = expected.value(x, y, b), a = actual.value(x, y, b);
                if (std::isnan(e) || std::isnan(a)) {
                    if (std::isnan(e) != std::isnan(a)) ++bad, wx = x, wy = y, wb = b, worst = INFINITY;
                    continue;
                }
                const double err = std::abs(a - e) / std::max(std::abs(e), floor > 0 ? floor : 1e-300);
                if (err > rel) ++bad;
                if (err > worst) worst = err, wx = x, wy = y, wb = b;
            }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " samples beyond relative tolerance " << rel << "; worst " << worst
                                         << " at (x=" << wx << ", y=" << wy << ", b=" << wb << "): expected "
                                         << describe_sample(expected, wx, wy, wb) << ", got "
                                         << describe_sample(actual, wx, wy, wb);
}

namespace {

// The test process's folder of files. Removed when the process ends if every test passed (CTest runs
// each test in its own process: ~1,800 folders a suite run were left in /tmp before); a failure's files
// stay to be looked at, and so do all with CUBEKIT_KEEP_TEST_FILES=1.
struct TempRoot {
    std::filesystem::path path;
    TempRoot() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "cubekit-test-XXXXXX").string();
        if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        path = tmpl;
    }
    ~TempRoot() {
        if (std::getenv("CUBEKIT_KEEP_TEST_FILES") || !::testing::UnitTest::GetInstance()->Passed()) {
            std::fprintf(stderr, "test files kept in %s\n", path.c_str());
            return;
        }
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

}  // namespace

std::filesystem::path temp_dir(const std::string& name) {
    static const TempRoot root;
    static std::atomic<int> counter{0};
    const std::filesystem::path dir = root.path / (name + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    return dir;
}

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string folder_listing(const std::filesystem::path& dir) {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        names.insert(std::filesystem::relative(e.path(), dir).string());
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return "{" + s + "}";
}

bool names_token(const std::string& text, const std::string& needle) {
    const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
        const bool left_ok = at == 0 || !word(needle.front()) || !word(text[at - 1]);
        const std::size_t end = at + needle.size();
        const bool right_ok = end == text.size() || !word(needle.back()) || !word(text[end]);
        if (left_ok && right_ok) return true;
    }
    return false;
}

CliResult run_cli(const std::string& args) {
    const std::filesystem::path dir = temp_dir("cli");
    const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
    const char* cli = std::getenv("CUBEKIT_CLI");  // scripts/gpu-check points it at the packed binary
    const std::string command = std::string("'") + (cli ? cli : CUBEKIT_CLI) + "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
    const int status = std::system(command.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    auto slurp = [](const std::string& path) {
        std::ifstream in(path);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    };
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

}  // namespace cubekit::testing
