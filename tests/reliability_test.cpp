// Regression tests of issue 18's reader and CLI faults: each reproduces the fault on a file the test
// makes, and checks the behaviour the issue asks for.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "cubekit/classify.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/detect_models.hpp"
#include "cubekit/io.hpp"
#include "io/io_internal.hpp"
#include "io_test_helpers.hpp"

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::io_test;
using cubekit::testing::cubes_identical;
using cubekit::testing::q;
using cubekit::testing::random_cube;
using cubekit::testing::run_cli;
using cubekit::testing::temp_dir;

namespace {

constexpr std::string_view kHeader =
    "ENVI\nsamples = 7\nlines = 5\nbands = 3\nheader offset = 0\ndata type = 2\ninterleave = bil\nbyte order = 0\n";

// A 7x5x3 i16 BIL cube (values ±3000, no zero plane) and its raw little-endian samples.
Cube small_cube() { return random_cube(7, 5, 3, DType::I16, 18, -3000, 3000, Layout::BIL); }
std::string raw_bytes(const Cube& c) { return std::string(reinterpret_cast<const char*>(c.bytes()), c.num_bytes()); }

std::string gzip_bytes(const std::string& data) {
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // 15 + 16: gzip wrapper
    std::string out(deflateBound(&z, uLong(data.size())) + 32, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = uInt(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = uInt(out.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

// A MATLAB version 4 file of one little-endian double matrix (column-major), named `name`.
std::string mat_v4(const std::string& name, int rows, int cols, const std::vector<double>& values) {
    std::string s;
    const auto word = [&](std::int32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
    word(0), word(rows), word(cols), word(0), word(std::int32_t(name.size() + 1));  // type 0000: LE double
    s += name;
    s += '\0';
    s.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
    return s;
}

// Starts the CLI with `args`, stdout and stderr to files in `dir`; returns its pid.
pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& dir, const std::vector<std::string>& env = {}) {
    const char* cli = std::getenv("CUBEKIT_CLI");
    const std::string exe = cli ? cli : CUBEKIT_CLI;
    const pid_t pid = fork();
    if (pid == 0) {
        const int out = ::open((dir / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = ::open((dir / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(out, 1), dup2(err, 2);
        for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
        std::vector<char*> argv{const_cast<char*>(exe.c_str())};
        for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(exe.c_str(), argv.data());
        _exit(127);
    }
    return pid;
}

}  // namespace

// ---- readers ------------------------------------------------------------------------------------

// "an ENVI data file a few bytes longer than its header implies is refused (GDAL and ENVI read it;
// read it and warn)".
TEST(Reliability, EnviDataLongerThanItsHeaderIsReadWithAWarning) {
    const fs::path dir = temp_dir("rel-envi-long");
    const Cube c = small_cube();
    put(dir / "x.hdr", kHeader);
    put(dir / "x.img", raw_bytes(c) + "xyz");
    const Cube r = read_cube(dir / "x.hdr");
    EXPECT_TRUE(cubes_identical(c, r));
    ASSERT_EQ(r.metadata().warnings.size(), 1u);
    EXPECT_NE(r.metadata().warnings[0].find("3 bytes after the 210"), std::string::npos) << r.metadata().warnings[0];
    EXPECT_TRUE(CubeFile(dir / "x.hdr").metadata().warnings.size() == 1);

    const auto cli = run_cli("info " + q(dir / "x.hdr"));
    EXPECT_EQ(cli.exit_code, 0) << cli.err;
    EXPECT_NE(cli.err.find("cubekit: warning: read_envi: "), std::string::npos) << cli.err;
    // A short file is still refused.
    put(dir / "x.img", raw_bytes(c).substr(1));
    EXPECT_THROW(read_cube(dir / "x.hdr"), InvalidInput);
}

// "gzip-compressed ENVI data (file compression = 1) is reported as truncated (read it with zlib)".
TEST(Reliability, GzipEnviDataIsRead) {
    const fs::path dir = temp_dir("rel-envi-gzip");
    const Cube c = small_cube();
    put(dir / "x.hdr", std::string(kHeader) + "file compression = 1\n");
    put(dir / "x.img", gzip_bytes(raw_bytes(c)));
    const Cube r = read_cube(dir / "x.hdr");
    EXPECT_TRUE(cubes_identical(c, r));
    EXPECT_TRUE(r.metadata().warnings.empty());
    // CubeFile reads a compressed file whole (no positions to read windows at) and gives the same windows.
    const CubeFile f(dir / "x.hdr");
    EXPECT_FALSE(f.windowed());
    Cube w(3, 2, 3, DType::I16, Layout::BSQ);
    f.read_window(2, 1, 3, 2, w.mutable_view());
    for (int b = 0; b < 3; ++b)
        for (int y = 0; y < 2; ++y)
            for (int x = 0; x < 3; ++x) EXPECT_EQ(w.value(x, y, b), c.value(x + 2, y + 1, b));
    // Written back uncompressed (no 'file compression' in the output header).
    write_cube(r, dir / "y.hdr");
    EXPECT_EQ(get(dir / "y.hdr").find("compression"), std::string::npos);
    EXPECT_TRUE(cubes_identical(c, read_cube(dir / "y.hdr")));

    // Too little data, damaged data and an unknown compression are refused, naming the reason.
    put(dir / "x.img", gzip_bytes(raw_bytes(c).substr(0, 100)));
    try {
        read_cube(dir / "x.hdr");
        ADD_FAILURE() << "a short gzip stream was accepted";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("truncated: the gzip data (file compression = 1) holds 100 bytes"), std::string::npos)
            << e.what();
    }
    std::string damaged = gzip_bytes(raw_bytes(c));
    damaged[damaged.size() / 2] ^= 0x5A;
    put(dir / "x.img", damaged);
    EXPECT_THROW(read_cube(dir / "x.hdr"), InvalidInput);
    put(dir / "x.hdr", std::string(kHeader) + "file compression = 7\n");
    try {
        read_cube(dir / "x.hdr");
        ADD_FAILURE() << "file compression = 7 was accepted";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("'file compression' = 7"), std::string::npos) << e.what();
    }
}

// "version 4 MAT files are refused though a comment in the reader says they are read".
TEST(Reliability, MatVersion4IsRead) {
    const fs::path dir = temp_dir("rel-mat4");
    std::vector<double> values(12);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.5 * double(i) - 4.0;
    put(dir / "m.mat", mat_v4("img", 3, 4, values));
    EXPECT_EQ(detect_format(dir / "m.mat"), FileFormat::Mat);
    const Cube c = read_cube(dir / "m.mat");
    ASSERT_EQ(c.shape().describe(), "4x3x1 f64 bsq");  // R x C = height x width
    for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 4; ++x) EXPECT_EQ(c.value(x, y, 0), values[std::size_t(y + 3 * x)]);
    // The same bytes without the .mat name are not taken for MATLAB (v4 has no signature).
    fs::copy_file(dir / "m.mat", dir / "m.bin");
    EXPECT_THROW(detect_format(dir / "m.bin"), InvalidInput);
}

// "variable names stored as UTF-8 print as '' in errors": names are shown as they are (UTF-8),
// other bytes escaped.
TEST(Reliability, MatVariableNamesAreShownInMessages) {
    const fs::path dir = temp_dir("rel-mat-names");
    put(dir / "u.mat", mat_v4("b\xC3\xA4nd", 2, 2, {1, 2, 3, 4}));
    put(dir / "l.mat", mat_v4("b\xE4nd", 2, 2, {1, 2, 3, 4}));
    for (const auto& [file, shown] : {std::pair{"u.mat", "b\xC3\xA4nd (2x2 double)"}, std::pair{"l.mat", "b\\xe4nd (2x2 double)"}}) {
        try {
            read_cube(dir / file, {.var = "other"});
            ADD_FAILURE() << file << ": --var other was accepted";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find(std::string("numeric variables: ") + shown), std::string::npos) << e.what();
        }
    }
}

// "with X.hdr beside X.tif or X.pnm, the .tif/.pnm is taken as ENVI data and refused".
TEST(Reliability, PnmBesideAnEnviHeaderIsReadAsPnm) {
    const fs::path dir = temp_dir("rel-pnm-hdr");
    const Cube c = random_cube(6, 4, 1, DType::U8, 5, 1, 255);
    write_cube(c, dir / "x.pgm");
    put(dir / "x.hdr", kHeader);  // an ENVI header of the same stem (another product)
    EXPECT_EQ(detect_format(dir / "x.pgm"), FileFormat::Pnm);
    EXPECT_TRUE(cubes_identical(c, read_cube(dir / "x.pgm")));
}

// ---- CLI ----------------------------------------------------------------------------------------

// "empty values (--bands '', --reconstruct '') silently mean the default or nothing";
// "detect_format: : cannot open for an empty path".
TEST(Reliability, EmptyArgumentsAreRefused) {
    const fs::path dir = temp_dir("rel-empty");
    const Cube c = small_cube();
    write_cube(c, dir / "c.npy");
    auto r = run_cli("rcmg " + q(dir / "c.npy") + " " + q(dir / "g.npy") + " --bands ''");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("is empty (after --bands)"), std::string::npos) << r.err;
    r = run_cli("info ''");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("argument 2 is empty"), std::string::npos) << r.err;
    EXPECT_EQ(listing(dir), (std::set<std::string>{"c.npy"}));
}

// "repeated band numbers are accepted without limit (--bands 1,1,1,... x 3000 grows to 780 MB)".
TEST(Reliability, BandListsMayNotOutgrowTheCube) {
    EXPECT_EQ(parse_band_list("0,0,2", 3), (std::vector<int>{0, 0, 2}));
    EXPECT_THROW(parse_band_list("0,0,2,1", 3), InvalidInput);
    EXPECT_THROW(parse_band_list("0-2,1", 3), InvalidInput);
    std::string many = "1";
    for (int i = 0; i < 3000; ++i) many += ",1";
    try {
        parse_band_list(many, 156);
        ADD_FAILURE() << "3001 repeats accepted";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("longer than the cube's 156 bands"), std::string::npos) << e.what();
    }
}

// "an output folder that does not exist is found only after the computation": refused before it,
// exit 3, naming the path and the folder.
TEST(Reliability, MissingOutputFolderIsRefusedBeforeTheWork) {
    const fs::path dir = temp_dir("rel-nodir");
    write_cube(random_cube(40, 30, 3, DType::U8, 7, 0, 255, Layout::BIP), dir / "p.png");
    const std::vector<std::string> runs = {
        "quantize " + q(dir / "p.png") + " " + q(dir / "nodir/q.png") + " -k 4",
        "rcmg " + q(dir / "p.png") + " " + q(dir / "nodir/g.npy"),
        "edges " + q(dir / "p.png") + " " + q(dir / "nodir/e.png"),
        "cluster " + q(dir / "p.png") + " " + q(dir / "nodir/l.npy") + " -k 3",
        "convert " + q(dir / "p.png") + " " + q(dir / "nodir/c.npy"),
    };
    for (const std::string& args : runs) {
        const auto r = run_cli(args + " --backend cpu --json");
        EXPECT_EQ(r.exit_code, 3) << args << "\n" << r.err;
        EXPECT_NE(r.err.find("the folder " + (dir / "nodir").string() + " does not exist"), std::string::npos) << args << "\n" << r.err;
        EXPECT_EQ(r.out, "") << args;
    }
    EXPECT_EQ(listing(dir), (std::set<std::string>{"p.png"}));
}

// "a library's exception text leaks ([json.exception.parse_error.101] ...)".
TEST(Reliability, JsonErrorsAreSaidWithoutTheLibraryTag) {
    const fs::path dir = temp_dir("rel-json");
    write_cube(random_cube(20, 10, 3, DType::F32, 3, 0.1, 1.0), dir / "c.npy");
    put(dir / "model.json", "{ not json");
    const auto r = run_cli("detect rbfn " + q(dir / "c.npy") + " " + q(dir / "s.npy") + " --model " + q(dir / "model.json"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("[json.exception"), std::string::npos) << r.err;
    EXPECT_EQ(json_reason("[json.exception.parse_error.101] parse error at line 1"), "parse error at line 1");
    EXPECT_EQ(json_reason("plain"), "plain");
}

// "a disk-full --per-band-out leaves its empty folder": a failed run takes back the folders it made.
TEST(Reliability, FailedPerBandOutputTakesItsFolderBack) {
    const fs::path dir = temp_dir("rel-per-band");
    write_cube(random_cube(30, 20, 3, DType::U8, 9, 0, 255, Layout::BIP), dir / "p.png");
    fs::create_directories(dir / "blocker");
    // The thresholds file, written after the per-band maps, fails: its name is a folder.
    const auto r = run_cli("edges " + q(dir / "p.png") + " " + q(dir / "e.png") + " --per-band-out " + q(dir / "made/bands") +
                           " --thresholds-out " + q(dir / "blocker") + "/ --backend cpu");
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(dir / "made")) << r.err;
    EXPECT_FALSE(fs::exists(dir / "e.png"));
}

// ---- signals ------------------------------------------------------------------------------------

// "SIGINT/SIGTERM have no handler: the process dies by the signal with no message and no documented
// exit code, and ... a partial .OUT.tmp-XXXXXX stays behind": exit 130, one line, nothing left,
// both when the work stops at its next check (the default grace) and when it is stopped at once.
TEST(Reliability, InterruptedRunExits130AndLeavesNothing) {
    const fs::path in_dir = temp_dir("rel-signal-in");
    write_cube(random_cube(1200, 1000, 3, DType::U8, 11, 0, 255, Layout::BIP), in_dir / "big.npy");
    struct Case {
        int signal;
        std::vector<std::string> env;
        std::string said;
    };
    // A long grace for the first case, so that the work always reaches its check (a slow, instrumented
    // build may take more than the default 2 s per k-means iteration).
    const Case cases[] = {{SIGINT, {"CUBEKIT_INTERRUPT_GRACE=30"}, "cubekit: interrupted by SIGINT; stopped, nothing written"},
                          {SIGTERM, {"CUBEKIT_INTERRUPT_GRACE=0"}, "cubekit: interrupted by SIGTERM; stopped ("}};
    for (const Case& k : cases) {
        const fs::path dir = temp_dir("rel-signal-" + std::to_string(k.signal));
        const pid_t pid = spawn_cli({"quantize", (in_dir / "big.npy").string(), (dir / "q.png").string(), "-k", "256", "--max-iter",
                                     "100000", "--tol", "0", "--backend", "cpu", "--threads", "1", "--quiet"},
                                    dir, k.env);
        ASSERT_GT(pid, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        ASSERT_EQ(::kill(pid, k.signal), 0);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        EXPECT_EQ(WEXITSTATUS(status), 130);
        const std::string err = get(dir / "stderr");
        EXPECT_EQ(err.rfind(k.said, 0), 0u) << err;
        EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
        EXPECT_EQ(listing(dir), (std::set<std::string>{"stderr", "stdout"}));
    }
}

// The immediate stop removes the temporaries of the writes in progress and makes later commits
// fail (in a child process: the state is process-wide and permanent).
TEST(Reliability, AbandonedWritesLeaveNoTemporary) {
    const fs::path dir = temp_dir("rel-abandon");
    EXPECT_EXIT(
        {
            io_detail::AtomicFile f("test", dir / "out.bin");
            f.write(std::string(1000, 'x'));
            const fs::path temp = f.temp_path();
            const bool existed = fs::exists(temp);
            abandon_unfinished_writes();
            bool refused = false;
            try {
                f.commit();
            } catch (const IoError&) {
                refused = true;
            }
            std::_Exit(existed && !fs::exists(temp) && refused && !fs::exists(dir / "out.bin") ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
    EXPECT_EQ(listing(dir), std::set<std::string>{});
}

// ---- fuzz regressions ---------------------------------------------------------------------------

// Every input the fuzzers found (fuzz/regressions/TARGET/) is refused with a cubekit error, in this
// build too (no sanitizer: these inputs once made the readers allocate gigabytes, read out of bounds
// or convert out of range). The fuzz targets' own replay runs in scripts/fuzz.
TEST(Reliability, FuzzRegressionsAreRefused) {
    const fs::path root = cubekit::testing::source_path("fuzz/regressions");
    if (!fs::exists(root)) GTEST_SKIP() << root << " is missing";
    const fs::path dir = temp_dir("rel-fuzz");
    int replayed = 0;
    for (const auto& target : fs::directory_iterator(root)) {
        const std::string t = target.path().filename().string();
        for (const auto& input : fs::directory_iterator(target.path())) {
            const std::string bytes = get(input.path());
            const auto refused = [&](auto&& read) {
                try {
                    read();
                    ADD_FAILURE() << input.path() << " was accepted";
                } catch (const cubekit::Error&) {
                }
            };
            if (t == "mat") refused([&] { put(dir / "x.mat", bytes), read_cube(dir / "x.mat", {.format = FileFormat::Mat}); });
            else if (t == "pnm") refused([&] { put(dir / "x.pgm", bytes), read_cube(dir / "x.pgm", {.format = FileFormat::Pnm}); });
            else if (t == "model") refused([&] { rbfn_model_from_json(bytes); });
            else if (t == "detector_files") refused([&] { put(dir / "s.json", bytes.substr(1)), read_background_stats(dir / "s.json"); });
            else if (t == "classify_models") {  // first byte odd: a LIBSVM model and its scaling, split at "\n@@\n"
                const std::string body = bytes.substr(1);
                const std::size_t cut = body.find("\n@@\n");
                put(dir / "m.svm", body.substr(0, cut));
                put(dir / "m.svm.scaling.json", cut == std::string::npos ? std::string() : body.substr(cut + 4));
                if (bytes[0] % 2 == 0) put(dir / "means.json", body);
                refused([&] { bytes[0] % 2 == 0 ? (void)read_class_means(dir / "means.json") : (void)read_svm_model(dir / "m.svm"); });
            } else if (t == "envi") {
                const std::size_t cut = bytes.find("\n@@\n");
                put(dir / "x.hdr", bytes.substr(0, cut));
                put(dir / "x.img", cut == std::string::npos ? std::string() : bytes.substr(cut + 4));
                refused([&] { read_cube(dir / "x.hdr", {.format = FileFormat::Envi}); });
            } else if (t == "gdal") {  // refused by GDAL, or (built without GDAL) as a format not built in
                put(dir / "x.tif", bytes);
                refused([&] { read_cube(dir / "x.tif", {.format = FileFormat::Gdal}); });
            } else if (t == "arguments" && bytes[0] % 5 == 0) {  // --crop X,Y,W,H, then the crop of a 40x30 cube
                int v[4] = {0, 0, 0, 0};
                ASSERT_EQ(std::sscanf(bytes.c_str() + 1, "%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3]), 4) << input.path();
                refused([&] { (void)Cube(40, 30, 1, DType::U8).crop(v[0], v[1], v[2], v[3]); });
            } else {
                ADD_FAILURE() << "no replay for fuzz target " << t;
            }
            ++replayed;
        }
    }
    EXPECT_GE(replayed, 15);
}
