// Bad output paths of every subcommand that writes (issue 18, item 3): an output that is one of the
// command's inputs (the same name, another spelling, a hard link, the partner file of an ENVI pair)
// is refused with exit 2 naming it, before any work and leaving the input as it was; an output in a
// folder the system will not write is refused with exit 3 naming it. One stderr line, nothing on
// stdout, nothing left in the folder.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "cubekit/io.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using namespace cubekit;
using cubekit::testing::folder_listing;
using cubekit::testing::names_token;
using cubekit::testing::q;
using cubekit::testing::run_cli;
using cubekit::testing::temp_dir;

std::string bytes_of(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The inputs every row may use, written into the row's folder: a 24x20x5 f32 cube, an RGB and a
// grey photo, a relief with marker seeds, labels, a mask, an ENVI pair and Zernike moments.
struct Fixtures {
    fs::path cube, photo, gray, relief, seeds, labels, mask, envi_hdr, envi_img, moments;
};

Fixtures make_fixtures(const fs::path& d) {
    Fixtures f{d / "in.npy", d / "photo.png", d / "gray.png", d / "relief.npy", d / "seeds.npy",
               d / "labels.npy", d / "mask.png", d / "scene.hdr", d / "scene.img", d / "moments.csv"};
    write_cube(cubekit::testing::random_cube(24, 20, 5, DType::F32, 1901, 0.0, 1.0), f.cube);
    write_cube(cubekit::testing::random_cube(24, 20, 3, DType::U8, 1902, 0, 255, Layout::BIP), f.photo);
    write_cube(cubekit::testing::random_cube(24, 20, 1, DType::U8, 1903, 0, 255), f.gray);
    write_cube(cubekit::testing::random_cube(24, 20, 1, DType::F32, 1904, 0.0, 9.0), f.relief);
    Cube seeds(24, 20, 1, DType::I32), labels(24, 20, 1, DType::I32), mask(24, 20, 1, DType::U8);
    for (int y = 0; y < 20; ++y)
        for (int x = 0; x < 24; ++x) {
            seeds.at<std::int32_t>(x, y, 0) = (x % 8 == 2 && y % 7 == 3) ? 1 + x / 8 : 0;
            labels.at<std::int32_t>(x, y, 0) = (x + y) % 3 == 0 ? 1 + x / 12 : 0;
            mask.at<std::uint8_t>(x, y, 0) = x > 10 && y > 8 ? 1 : 0;
        }
    write_cube(seeds, f.seeds);
    write_cube(labels, f.labels);
    write_cube(mask, f.mask);
    write_cube(cubekit::testing::random_cube(24, 20, 4, DType::I16, 1905, 0, 900), f.envi_hdr);
    const auto made = run_cli("zernike " + q(f.gray) + " --max-order 6 -o " + q(f.moments) + " --quiet");
    if (made.exit_code != 0) throw std::runtime_error("fixture: zernike failed: " + made.err);
    return f;
}

struct PathRow {
    std::string name;
    int exit_code;
    // The command line (fixtures written into dir), and what the stderr line must name.
    std::function<std::pair<std::string, std::vector<std::string>>(const fs::path& dir, const Fixtures& f)> make;
};

std::ostream& operator<<(std::ostream& os, const PathRow& r) { return os << r.name; }

// Output == input: exit 2, the output named.
PathRow same(std::string name, std::function<std::string(const Fixtures&)> args, std::function<fs::path(const Fixtures&)> out) {
    return {std::move(name), 2, [=](const fs::path&, const Fixtures& f) {
                return std::pair{args(f), std::vector<std::string>{out(f).string()}};
            }};
}

std::vector<PathRow> same_file_rows() {
    return {
        same("convert_onto_input", [](const Fixtures& f) { return "convert " + q(f.cube) + " " + q(f.cube); },
             [](const Fixtures& f) { return f.cube; }),
        same("rcmg_onto_input", [](const Fixtures& f) { return "rcmg " + q(f.cube) + " " + q(f.cube); },
             [](const Fixtures& f) { return f.cube; }),
        same("rcmg_second_output_onto_input",
             [](const Fixtures& f) { return "rcmg " + q(f.cube) + " " + q(f.photo.parent_path() / "g.png") + " " + q(f.cube); },
             [](const Fixtures& f) { return f.cube; }),
        same("rcmg_onto_input_other_spelling",
             [](const Fixtures& f) { return "rcmg " + q(f.cube) + " " + q(f.cube.parent_path() / "." / "in.npy"); },
             [](const Fixtures& f) { return f.cube.parent_path() / "." / "in.npy"; }),
        {"rcmg_onto_hard_link_of_input", 2, [](const fs::path& d, const Fixtures& f) {
             fs::create_hard_link(f.cube, d / "link.npy");
             return std::pair{"rcmg " + q(d / "link.npy") + " " + q(f.cube), std::vector<std::string>{f.cube.string()}};
         }},
        same("rcmg_onto_envi_data_of_input", [](const Fixtures& f) { return "rcmg " + q(f.envi_hdr) + " " + q(f.envi_img); },
             [](const Fixtures& f) { return f.envi_img; }),
        same("rcmg_onto_envi_header_of_input", [](const Fixtures& f) { return "rcmg " + q(f.envi_img) + " " + q(f.envi_hdr); },
             [](const Fixtures& f) { return f.envi_hdr; }),
        same("quantize_onto_input", [](const Fixtures& f) { return "quantize " + q(f.photo) + " " + q(f.photo) + " -k 4"; },
             [](const Fixtures& f) { return f.photo; }),
        same("cluster_onto_input", [](const Fixtures& f) { return "cluster " + q(f.cube) + " " + q(f.cube) + " -k 3"; },
             [](const Fixtures& f) { return f.cube; }),
        same("cluster_onto_mask", [](const Fixtures& f) { return "cluster " + q(f.cube) + " " + q(f.labels) + " -k 3 --mask " + q(f.labels); },
             [](const Fixtures& f) { return f.labels; }),
        same("edges_onto_input", [](const Fixtures& f) { return "edges " + q(f.cube) + " " + q(f.cube); },
             [](const Fixtures& f) { return f.cube; }),
        same("edges_baseline_onto_input", [](const Fixtures& f) { return "edges-baseline " + q(f.gray) + " " + q(f.gray); },
             [](const Fixtures& f) { return f.gray; }),
        same("pca_onto_input", [](const Fixtures& f) { return "pca " + q(f.cube) + " " + q(f.cube); },
             [](const Fixtures& f) { return f.cube; }),
        same("zernike_reconstruction_onto_input",
             [](const Fixtures& f) { return "zernike " + q(f.gray) + " --max-order 6 --reconstruct " + q(f.gray); },
             [](const Fixtures& f) { return f.gray; }),
        same("zernike_moments_onto_input_image",
             [](const Fixtures& f) { return "zernike " + q(f.moments) + " --max-order 6 -o " + q(f.moments); },
             [](const Fixtures& f) { return f.moments; }),
        same("detect_rx_onto_input", [](const Fixtures& f) { return "detect rx " + q(f.cube) + " " + q(f.cube); },
             [](const Fixtures& f) { return f.cube; }),
        same("detect_mf_onto_target_mask",
             [](const Fixtures& f) { return "detect mf " + q(f.cube) + " " + q(f.mask) + " --target-mask " + q(f.mask); },
             [](const Fixtures& f) { return f.mask; }),
        same("classify_onto_training_labels",
             [](const Fixtures& f) { return "classify " + q(f.cube) + " " + q(f.labels) + " --train " + q(f.labels); },
             [](const Fixtures& f) { return f.labels; }),
        same("watershed_onto_input", [](const Fixtures& f) { return "watershed " + q(f.relief) + " " + q(f.relief); },
             [](const Fixtures& f) { return f.relief; }),
        same("watershed_onto_markers",
             [](const Fixtures& f) { return "watershed " + q(f.relief) + " " + q(f.seeds) + " --markers " + q(f.seeds); },
             [](const Fixtures& f) { return f.seeds; }),
        same("segment_onto_input", [](const Fixtures& f) { return "segment " + q(f.cube) + " " + q(f.cube); },
             [](const Fixtures& f) { return f.cube; }),
        same("detect_score_roc_onto_scores",
             [](const Fixtures& f) { return "detect-score " + q(f.relief) + " " + q(f.mask) + " --roc-out " + q(f.relief); },
             [](const Fixtures& f) { return f.relief; }),
    };
}

// A folder the system will not write: a chmod 0555 folder, or, for root (whom permissions do not
// stop), /sys, which refuses new files to everyone.
fs::path unwritable_folder(const fs::path& dir) {
    if (::geteuid() != 0) {
        fs::create_directory(dir / "ro");
        fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
        return dir / "ro";
    }
    return "/sys";
}

PathRow unwritable(std::string name, std::function<std::string(const Fixtures&, const fs::path& out)> args, std::string file) {
    return {std::move(name), 3, [=](const fs::path& d, const Fixtures& f) {
                const fs::path out = unwritable_folder(d) / file;
                return std::pair{args(f, out), std::vector<std::string>{out.string()}};
            }};
}

std::vector<PathRow> unwritable_rows() {
    return {
        unwritable("convert_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "convert " + q(f.cube) + " " + q(o); }, "o.npy"),
        unwritable("rcmg_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "rcmg " + q(f.cube) + " " + q(o); }, "o.npy"),
        unwritable("quantize_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "quantize " + q(f.photo) + " " + q(o) + " -k 4"; }, "o.png"),
        unwritable("cluster_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "cluster " + q(f.cube) + " " + q(o) + " -k 3"; }, "o.npy"),
        unwritable("edges_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "edges " + q(f.cube) + " " + q(o); }, "o.png"),
        unwritable("edges_baseline_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "edges-baseline " + q(f.gray) + " " + q(o); }, "o.png"),
        unwritable("pca_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "pca " + q(f.cube) + " " + q(o); }, "o.npy"),
        unwritable("zernike_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "zernike " + q(f.gray) + " --max-order 6 -o " + q(o); }, "o.csv"),
        unwritable("zernike_reconstruct_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "zernike-reconstruct " + q(f.moments) + " " + q(o) + " --size 24x20"; }, "o.png"),
        unwritable("detect_rx_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "detect rx " + q(f.cube) + " " + q(o); }, "o.npy"),
        unwritable("detect_score_roc_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "detect-score " + q(f.relief) + " " + q(f.mask) + " --roc-out " + q(o); }, "roc.csv"),
        unwritable("train_model_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "train rbfn " + q(f.cube) + " --labels " + q(f.mask) + " -o " + q(o); }, "m.json"),
        unwritable("synth_into_unwritable_folder", [](const Fixtures&, const fs::path& o) { return "synth castaways " + q(o) + " --width 64 --height 64"; }, "s.npy"),
        unwritable("classify_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "classify " + q(f.cube) + " " + q(o) + " --train " + q(f.labels); }, "c.npy"),
        unwritable("watershed_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "watershed " + q(f.relief) + " " + q(o); }, "w.npy"),
        unwritable("segment_into_unwritable_folder", [](const Fixtures& f, const fs::path& o) { return "segment " + q(f.cube) + " " + q(o); }, "s.npy"),
        unwritable("demo_into_unwritable_folder", [](const Fixtures&, const fs::path& o) { return "demo --out " + q(o); }, "demo"),
    };
}

class CliPaths : public ::testing::TestWithParam<PathRow> {};

TEST_P(CliPaths, RefusedBeforeAnyWorkNothingLeftInputsUnchanged) {
    const PathRow& row = GetParam();
    const fs::path dir = temp_dir("paths-" + row.name);
    const Fixtures f = make_fixtures(dir);
    const auto [args, named] = row.make(dir, f);
    std::vector<std::pair<fs::path, std::string>> inputs;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) inputs.emplace_back(e.path(), bytes_of(e.path()));
    const std::string before = folder_listing(dir);
    const auto r = run_cli(args);
    SCOPED_TRACE("cubekit " + args + "\n  exit " + std::to_string(r.exit_code) + ", stderr: " + r.err);
    EXPECT_EQ(r.exit_code, row.exit_code);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be exactly one line";
    for (const std::string& n : named) EXPECT_TRUE(names_token(r.err, n)) << "stderr does not name '" << n << "'";
    EXPECT_EQ(folder_listing(dir), before);
    for (const auto& [path, bytes] : inputs) EXPECT_TRUE(bytes_of(path) == bytes) << path << " changed";
    if (fs::exists(dir / "ro")) fs::permissions(dir / "ro", fs::perms::owner_all);  // for the cleanup
}

INSTANTIATE_TEST_SUITE_P(SameFile, CliPaths, ::testing::ValuesIn(same_file_rows()),
                         [](const ::testing::TestParamInfo<PathRow>& i) { return i.param.name; });
INSTANTIATE_TEST_SUITE_P(Unwritable, CliPaths, ::testing::ValuesIn(unwritable_rows()),
                         [](const ::testing::TestParamInfo<PathRow>& i) { return i.param.name; });

}  // namespace
