#include "outputs.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cubekit/error.hpp"
#include "interrupt.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

std::string beside(const std::string& out, const std::string& suffix) {
    const std::filesystem::path p(out);
    return (p.parent_path() / (p.stem().string() + suffix)).string();
}

FileFormat format_of(const std::string& flag, const std::string& path) {
    try {
        return output_format(path);
    } catch (const InvalidInput& e) {
        throw InvalidInput(flag + " = " + path + ": " + e.what());
    }
}

namespace {
// The files the command's input_file flags named (FILE of FILE:VAR), in the order given.
std::vector<std::string>& input_files() {
    static std::vector<std::string> files;
    return files;
}

// `path` and the files written or read with it: an ENVI header and its data file.
std::vector<std::filesystem::path> with_partners(const std::filesystem::path& path) {
    std::vector<std::filesystem::path> all = {path};
    const std::string ext = path.extension().string();
    if (ext == ".hdr" || ext == ".img") {
        std::filesystem::path p = path;
        all.push_back(p.replace_extension(ext == ".hdr" ? ".img" : ".hdr"));
        if (ext == ".hdr") all.push_back(std::filesystem::path(path).replace_extension());
    }
    return all;
}

// Refuses an output that is a file the command reads (both exist: the same inode, whatever the name).
void check_not_an_input(const std::string& output) {
    for (const std::filesystem::path& out : with_partners(output))
        for (const std::string& input : input_files())
            for (const std::filesystem::path& in : with_partners(input)) {
                std::error_code ec;
                if (std::filesystem::equivalent(out, in, ec) && !ec)
                    throw InvalidInput(output + ": this output would overwrite the input " + input +
                                       "; write it to another file");
            }
}
}  // namespace

CLI::Option* input_file(CLI::Option* option) {
    return option->each([](const std::string& value) {
        // FILE.mat:VAR names FILE (the rule of split_secondary: only when VALUE itself is no file).
        const std::size_t colon = value.rfind(':');
        std::error_code ec;
        if (!std::filesystem::exists(value, ec) && colon != std::string::npos && colon > 0)
            input_files().push_back(value.substr(0, colon));
        else
            input_files().push_back(value);
    });
}

void check_outputs(const std::vector<std::string>& paths, const std::string& what) {
    for (std::size_t i = 0; i < paths.size(); ++i)
        for (std::size_t j = i + 1; j < paths.size(); ++j)
            if (!paths[i].empty() && std::filesystem::path(paths[i]).lexically_normal() ==
                                         std::filesystem::path(paths[j]).lexically_normal())
                throw InvalidInput(what + ": two outputs would be the same file, " + paths[j]);
    for (const std::string& p : paths) check_output_folder(p);
}

void check_output_folder(const std::string& path) {
    if (path.empty()) return;
    check_not_an_input(path);
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    const std::filesystem::path folder = parent.empty() ? std::filesystem::path(".") : parent;
    std::error_code ec;
    const auto status = std::filesystem::status(folder, ec);
    if (!std::filesystem::exists(status))
        throw IoError(path + ": cannot write: the folder " + folder.string() + " does not exist");
    if (!std::filesystem::is_directory(status)) throw IoError(path + ": cannot write: " + folder.string() + " is not a folder");
    if (::access(folder.c_str(), W_OK | X_OK) != 0)
        throw IoError(path + ": cannot write in the folder " + folder.string() + ": " + std::strerror(errno));
    // access() says yes to root everywhere but on a read-only mount: a file made and removed again
    // is the answer the write will get (a sysfs or FUSE folder may still refuse).
    std::string probe = (folder / ".cubekit-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) throw IoError(path + ": cannot write in the folder " + folder.string() + ": " + std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
}

void remove_outputs(const std::vector<std::string>& paths) {
    for (const std::string& p : paths) {
        std::error_code ec;
        std::filesystem::remove(p, ec);
        bool envi = false;
        try {
            envi = output_format(p) == FileFormat::Envi;
        } catch (const InvalidInput&) {  // .json, .csv: no image format, one file
        }
        if (envi) {  // ENVI wrote a header and a data file
            std::filesystem::path hdr(p), img(p);
            hdr.replace_extension(".hdr");
            img.replace_extension(".img");
            std::filesystem::remove(hdr, ec);
            std::filesystem::remove(img, ec);
        }
    }
}

void OutputList::add(const std::string& path, const std::string& role, const std::string& format,
                     const std::string& dtype) {
    nlohmann::json o = {{"role", role}, {"path", path}, {"format", format}};
    if (!dtype.empty()) o["dtype"] = dtype;
    add(path, std::move(o));
}

void MadeFolders::create(const std::string& folder, const std::string& flag) {
    std::vector<std::string> missing;
    std::error_code ec;
    for (std::filesystem::path p = std::filesystem::path(folder).lexically_normal(); !p.empty() && !std::filesystem::exists(p, ec);
         p = p.parent_path()) {
        missing.push_back(p.string());
        if (p == p.parent_path()) break;
    }
    std::filesystem::create_directories(folder, ec);
    if (ec) throw IoError(flag + " " + folder + ": cannot create the folder: " + ec.message());
    made_.insert(made_.end(), missing.rbegin(), missing.rend());
}

void MadeFolders::remove_made() const noexcept {
    std::error_code ec;
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) std::filesystem::remove(*it, ec);  // only when empty
}

OutputList::OutputList(OutputList&& other) noexcept
    : paths_(std::exchange(other.paths_, {})), json_(std::exchange(other.json_, nlohmann::json::array())) {}

OutputList::~OutputList() {
    for (const std::string& p : paths_) forget_run_output(p);
}

void OutputList::add(const std::string& path, nlohmann::json entry) {
    register_run_output(path);
    paths_.push_back(path);
    json_.push_back(std::move(entry));
}

void OutputList::remove_all() const { remove_outputs(paths_); }

InPlaceResult::InPlaceResult(const std::vector<std::string>& outputs, const CubeShape& shape, const Metadata& metadata,
                             const WriteOptions& write) {
    for (const std::string& out : outputs)
        if (!out.empty() && CubeFileWriter::streamable(out, write)) {
            writer_.emplace(out, shape, metadata, write);
            path_ = out;
            view_ = writer_->view();
            cube_ = Cube::borrow(view_);
            cube_.metadata() = metadata;
            return;
        }
    cube_ = Cube::uninitialized(shape.width, shape.height, shape.bands, shape.dtype, shape.layout);
    cube_.metadata() = metadata;
    view_ = cube_.mutable_view();
}

void InPlaceResult::commit(OutputList& written, nlohmann::json entry) {
    if (!writer_) return;
    writer_->commit();
    entry["path"] = path_;
    entry["format"] = std::string(format_name(output_format(path_)));
    entry["dtype"] = std::string(dtype_name(cube_.dtype()));
    entry["streamed"] = true;
    written.add(path_, std::move(entry));
}

double display_white_point(const Cube& one_band) {
    std::vector<double> finite;
    finite.reserve(one_band.shape().num_pixels());
    double largest = 0;
    for (int y = 0; y < one_band.height(); ++y)
        for (int x = 0; x < one_band.width(); ++x) {
            const double v = one_band.value(x, y, 0);
            if (!std::isfinite(v)) continue;
            largest = std::max(largest, v);
            finite.push_back(v);
        }
    if (finite.empty()) return 0;
    const std::size_t k = std::min(finite.size() - 1, std::size_t(0.99 * double(finite.size())));
    std::nth_element(finite.begin(), finite.begin() + std::ptrdiff_t(k), finite.end());
    return finite[k] > 0 ? finite[k] : largest;
}

void write_float_image(const Cube& image, const std::string& path, const std::string& role, const WriteOptions& write,
                       OutputList& written, double white) {
    const FileFormat f = output_format(path);
    nlohmann::json entry = {{"path", path}, {"format", std::string(format_name(f))}};
    if (!role.empty()) entry["role"] = role;
    if (f == FileFormat::Png || f == FileFormat::Pnm) {
        if (std::isnan(white)) white = display_white_point(image);
        write_cube(to_display_u8(image, white), path, write);
        entry["dtype"] = "u8";
        entry["scale"] = {{"rule", "round(255 * min(v, white) / white), white = 99th percentile"}, {"white", white}};
    } else {
        write_cube(image, path, write);
        entry["dtype"] = std::string(dtype_name(image.dtype()));
    }
    written.add(path, std::move(entry));
}

Cube binary_map_for_file(const Cube& maps, const std::string& path, bool invert) {
    Cube out = maps.clone();
    if (output_format(path) == FileFormat::Npy) return out;
    std::uint8_t* v = out.data<std::uint8_t>();
    for (std::size_t i = 0; i < out.num_elements(); ++i) v[i] = ((v[i] != 0) != invert) ? 255 : 0;
    return out;
}

namespace {

/// Hue i·φ (φ = the golden ratio, in turns) at saturation s and brightness v (HSV → RGB).
Rgb golden_angle_colour(std::int64_t i, double s, double v) {
    const double h = std::fmod(double(i) * 0.6180339887498949, 1.0) * 6.0;
    const int sector = int(h);
    const double f = h - sector, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    const double rgb[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
    const double* c = rgb[sector % 6];
    return {std::uint8_t(std::lround(255 * c[0])), std::uint8_t(std::lround(255 * c[1])), std::uint8_t(std::lround(255 * c[2]))};
}

}  // namespace

Rgb class_colour(std::int64_t j) {
    static constexpr std::uint8_t kTable[20][3] = {
        {0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c}, {0xd6, 0x27, 0x28}, {0x94, 0x67, 0xbd},
        {0x8c, 0x56, 0x4b}, {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f}, {0xbc, 0xbd, 0x22}, {0x17, 0xbe, 0xcf},
        {0xae, 0xc7, 0xe8}, {0xff, 0xbb, 0x78}, {0x98, 0xdf, 0x8a}, {0xff, 0x98, 0x96}, {0xc5, 0xb0, 0xd5},
        {0xc4, 0x9c, 0x94}, {0xf7, 0xb6, 0xd2}, {0xc7, 0xc7, 0xc7}, {0xdb, 0xdb, 0x8d}, {0x9e, 0xda, 0xe5}};
    if (j >= 0 && j < 20) return {kTable[j][0], kTable[j][1], kTable[j][2]};
    return golden_angle_colour(j, 0.65, (j % 2) ? 0.75 : 0.95);
}

Rgb region_colour(std::int64_t label) {
    if (label <= 0) return {0, 0, 0};
    return golden_angle_colour(label, 0.6, 0.65 + 0.15 * double(label % 3));
}

std::string readable_json(const nlohmann::ordered_json& j) {
    std::string s = "{";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
        s += first ? "\n  " : ",\n  ";
        first = false;
        s += nlohmann::ordered_json(it.key()).dump() + ": ";
        const nlohmann::ordered_json& v = it.value();
        if (v.is_array() && !v.empty() && v.front().is_object()) {
            s += "[";
            for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ",\n    " : "\n    ") + v[i].dump();
            s += "\n  ]";
        } else {
            s += v.dump();
        }
    }
    return s + "\n}\n";
}

}  // namespace cubekit::cli
