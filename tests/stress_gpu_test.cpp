// Concurrency, determinism and out-of-memory on CUDA (issue 18, items 5–7): the families of
// stress_testing.hpp run from 8 threads x 50 calls (half the threads with their own Context and
// stream, half sharing one) and give the serial GPU results; every output is identical run to run
// and across contexts; and a device allocation failing at each allocation site in turn gives
// OutOfMemory naming the bytes asked for and free, after which the next call is right again.
// Results are compared with the serial GPU run of the same build (the GPU tests of each family
// compare the GPU with the CPU). Skips without a device.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/memory_counters.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "stress_testing.hpp"

using namespace cubekit;
using namespace cubekit::testing::stress;

namespace {

Context cuda(int device) { return Context(ContextOptions{.backend = Backend::Cuda, .device = device}); }

const std::vector<std::uint64_t>& serial_on(const Context& gpu) {
    static const std::vector<std::uint64_t> d = [&] {
        std::vector<std::uint64_t> out;
        for (const Family& f : families()) out.push_back(f.run(gpu));
        return out;
    }();
    return d;
}

std::string file_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint64_t allocations() {
    const MemoryCounters m = memory_counters();
    return m.device_allocations + m.pinned_allocations;
}

}  // namespace

TEST(GpuDeterminism, EveryFamilyIsIdenticalRunToRunAndAcrossContexts) {
    REQUIRE_GPU();
    const std::vector<Family> fams = families();
    const std::vector<std::uint64_t>& want = serial_on(gpu);
    const Context other = cuda(gpu.device());
    for (std::size_t i = 0; i < fams.size(); ++i)
        for (int run = 0; run < 3; ++run) {
            EXPECT_EQ(fams[i].run(gpu), want[i]) << fams[i].name << ", run " << run;
            EXPECT_EQ(fams[i].run(other), want[i]) << fams[i].name << " on a second context, run " << run;
        }
}

// Half of the threads own a Context (and so a stream), half share the test's one: calls on a shared
// context queue on its one stream, each with its own buffers.
TEST(GpuConcurrency, EightThreadsOfFiftyCallsGiveTheSerialResults) {
    REQUIRE_GPU();
    const std::vector<std::string> failures =
        run_concurrently(families(), serial_on(gpu), gpu, [&] { return cuda(gpu.device()); });
    EXPECT_TRUE(failures.empty()) << failures.size() << " failure(s), first: " << (failures.empty() ? "" : failures.front());
}

// Item 6: for every family, each of the device and pinned allocations one call makes is failed in
// turn. The call must throw OutOfMemory (never crash, hang or return a wrong result), with the
// bytes asked for and free in its message, and the call after it must give the serial result: a
// failed call leaves no state behind that spoils the next.
TEST(GpuOutOfMemory, EveryAllocationSiteOfEveryFamilyFailsCleanly) {
    REQUIRE_GPU();
    const std::vector<Family> fams = families();
    const std::vector<std::uint64_t>& want = serial_on(gpu);
    std::size_t sites_total = 0;
    for (std::size_t i = 0; i < fams.size(); ++i) {
        const std::uint64_t before = allocations();
        ASSERT_EQ(fams[i].run(gpu), want[i]) << fams[i].name;
        const std::uint64_t sites = allocations() - before;
        if (sites == 0) std::printf("%s: no device allocation (it runs on the host)\n", fams[i].name.c_str());
        sites_total += sites;
        for (std::uint64_t nth = 0; nth < sites; ++nth) {
            SCOPED_TRACE(::testing::Message() << fams[i].name << ", allocation " << nth << " of " << sites);
            detail::fail_device_allocation(std::int64_t(nth));
            try {
                // A family that falls back (to smaller tiles, or pageable copies) must still be right.
                EXPECT_EQ(fams[i].run(gpu), want[i]) << "the call returned although an allocation failed";
            } catch (const OutOfMemory& e) {
                const std::string what = e.what();
                EXPECT_NE(what.find("bytes"), std::string::npos) << what;
                EXPECT_TRUE(what.find("free") != std::string::npos || what.find("page-lock") != std::string::npos) << what;
            } catch (const std::exception& e) {
                ADD_FAILURE() << "not OutOfMemory: " << e.what();
            }
            detail::fail_device_allocation(-1);
            EXPECT_EQ(fams[i].run(gpu), want[i]) << "the call after the failure";
        }
    }
    std::printf("allocation sites failed in turn: %zu over %zu families\n", sites_total, fams.size());
}

// Through the CLI: a failed allocation gives exit 4, one line naming the bytes asked for and free,
// and nothing written; or (rcmg falls back to tiles where the device is short) the normal output.
TEST(GpuOutOfMemory, CliExitsFourAndWritesNothing) {
    REQUIRE_GPU();
    (void)gpu;  // the CLI makes its own context
    namespace fs = std::filesystem;
    using cubekit::testing::q;
    const fs::path in = cubekit::testing::source_path("data/samson/samson_1.img");
    for (const char* command : {"rcmg", "edges", "cluster"}) {
        const std::string ext = std::string(".npy");
        const fs::path clean = cubekit::testing::temp_dir("oom-clean");
        const std::string tail = std::string(command) == "cluster" ? " -k 4" : "";
        const auto normal = cubekit::testing::run_cli(std::string(command) + " " + q(in) + " " + q(clean / ("out" + ext)) +
                                                      " --backend cuda --quiet" + tail);
        ASSERT_EQ(normal.exit_code, 0) << normal.err;
        for (const char* nth : {"0", "1", "2", "5"}) {
            SCOPED_TRACE(::testing::Message() << command << ", allocation " << nth);
            const fs::path dir = cubekit::testing::temp_dir("oom-cli");
            setenv("CUBEKIT_FAIL_DEVICE_ALLOCATION", nth, 1);
            const auto r = cubekit::testing::run_cli(std::string(command) + " " + q(in) + " " + q(dir / ("out" + ext)) +
                                                     " --backend cuda --quiet" + tail);
            unsetenv("CUBEKIT_FAIL_DEVICE_ALLOCATION");
            if (r.exit_code == 0) {
                EXPECT_EQ(file_bytes(dir / ("out" + ext)), file_bytes(clean / ("out" + ext)));
                continue;
            }
            EXPECT_EQ(r.exit_code, 4) << r.err;
            EXPECT_NE(r.err.find("cannot allocate"), std::string::npos) << r.err;
            EXPECT_NE(r.err.find("free"), std::string::npos) << r.err;
            EXPECT_TRUE(fs::is_empty(dir)) << "something was left in " << dir;
        }
    }
}

// A relief the device cannot hold whole (its free memory capped by CUBEKIT_DEVICE_FREE_BYTES, a test
// hook) runs in tiles unasked, with the whole run's labels; --json says so (tiled.automatic).
TEST(GpuOutOfMemory, WatershedCliTilesAReliefTheDeviceCannotHold) {
    REQUIRE_GPU();
    const std::filesystem::path dir = cubekit::testing::temp_dir("ws-auto-tiles");
    write_cube(cubekit::testing::random_cube(900, 700, 1, DType::F32, 7, 0.0, 1.0), dir / "relief.npy");  // ~40 bytes a pixel: 25 MB
    const std::string args = " " + cubekit::testing::q(dir / "relief.npy") + " ";
    const auto whole = cubekit::testing::run_cli("watershed" + args + cubekit::testing::q(dir / "whole.npy") + " --backend cuda --json --quiet");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    EXPECT_EQ(whole.out.find("\"tiled\""), std::string::npos);
    setenv("CUBEKIT_DEVICE_FREE_BYTES", "8000000", 1);
    const auto small = cubekit::testing::run_cli("watershed" + args + cubekit::testing::q(dir / "tiled.npy") + " --backend cuda --json");
    unsetenv("CUBEKIT_DEVICE_FREE_BYTES");
    ASSERT_EQ(small.exit_code, 0) << small.err;
    EXPECT_NE(small.err.find("runs in tiles"), std::string::npos) << small.err;
    EXPECT_NE(small.out.find("\"automatic\": true"), std::string::npos) << small.out;
    EXPECT_EQ(file_bytes(dir / "whole.npy"), file_bytes(dir / "tiled.npy"));
}
