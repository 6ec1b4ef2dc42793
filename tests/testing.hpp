#pragma once
// Shared test helpers: seeds, random cubes, contexts, data paths, comparisons.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"

/// First line of a GPU test: `gpu` is the CUDA context; without a device the test skips, saying so.
#define REQUIRE_GPU()                                                                      \
    const ::cubekit::Context* gpu_ptr = ::cubekit::testing::cuda_context();                 \
    if (!gpu_ptr) GTEST_SKIP() << "no CUDA device (this test runs in scripts/gpu-check)"; \
    const ::cubekit::Context& gpu = *gpu_ptr

namespace cubekit::testing {

/// A fresh seed per call (printed by the caller's SCOPED_TRACE); CUBEKIT_TEST_SEED=N replays N.
std::uint64_t test_seed();

/// W×H×B cube of `dtype` in `layout`, samples uniform in [lo, hi] (rounded for integer types).
Cube random_cube(int width, int height, int bands, DType dtype, std::uint64_t seed, double lo, double hi,
                 Layout layout = Layout::BSQ);
/// Random integer-valued samples drawn from only `levels` distinct values (many ties).
Cube random_levels_cube(int width, int height, int bands, DType dtype, std::uint64_t seed, int levels,
                        Layout layout = Layout::BSQ);

const Context& cpu_context();
/// The CUDA context, or nullptr when no device exists (the caller GTEST_SKIPs, naming why).
const Context* cuda_context();
/// Every visible CUDA device, or the one device twice (two sets of workers on it): the device list of
/// the multi-GPU cases of the tiled tests.
std::vector<int> devices_twice_or_all();

/// Path of a file in the repository (e.g. "data/samson/samson_1.img").
std::filesystem::path source_path(const std::string& relative);
/// Path of a file in ../shared/data (or $CUBEKIT_SHARED_DATA); nullopt when absent.
std::optional<std::filesystem::path> shared_data_path(const std::string& relative);

/// A real scene file and the MATLAB variable that holds its cube ("" for other formats).
struct SceneFile {
    std::filesystem::path path;
    std::string var;
};
/// The embedded scene (data/samson) plus every hyperspectral cube of ../shared/data that is present.
std::vector<SceneFile> hyperspectral_scenes();
/// The images of ../shared/data/<folder> ("gray" or "rgb") that are present, sorted by name.
std::vector<std::filesystem::path> shared_photos(const std::string& folder);

/// Bitwise equality of two cubes of the same shape (NaN equal to NaN with the same bits);
/// on failure reports the count of differing samples and the first one (x, y, b, both values).
::testing::AssertionResult cubes_identical(const Cube& expected, const Cube& actual);
/// |a − e| ≤ rel · max(|e|, floor) for every sample (NaN must match NaN); reports the worst.
::testing::AssertionResult cubes_close(const Cube& expected, const Cube& actual, double rel, double floor = 0.0);

/// A fresh empty folder under one /tmp/cubekit-test-XXXXXX per test process.
std::filesystem::path temp_dir(const std::string& name);

/// The whole content of a file (empty when it cannot be read).
std::string read_text(const std::filesystem::path& path);

/// Every entry under `dir` (recursively), as paths relative to it: "{a, b, b/c}".
std::string folder_listing(const std::filesystem::path& dir);

/// True when `needle` occurs in `text` as a whole token: an alphanumeric edge of the needle must
/// not touch another alphanumeric character ("6" is not found in "16", "x.img" not in "x.imgs").
bool names_token(const std::string& text, const std::string& needle);

/// Runs the cubekit executable with arguments (shell-quoted here); captures stdout, stderr, exit code.
struct CliResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};
CliResult run_cli(const std::string& args);

/// `p` in single quotes (a quote inside escaped), for the command lines given to run_cli.
inline std::string q(const std::filesystem::path& p) {
    std::string s = "'";
    for (char c : p.string()) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return s + "'";
}

}  // namespace cubekit::testing
