#pragma once
// Output helpers every subcommand uses: output names beside OUT, the list of outputs a run wrote
// (taken back when a later output fails, so a failed run leaves nothing), removal of a written
// output set, display scaling of float images and of 0/1 maps, and JSON text for files people read.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

/// `out` with its extension replaced by `suffix`, in the same folder: beside("a/x.png", ".palette.json")
/// = "a/x.palette.json".
std::string beside(const std::string& out, const std::string& suffix);

/// The format an output name asks for (io.hpp: output_format); an unknown or read-only extension is
/// InvalidInput "FLAG = PATH: ..." (`flag`: "OUT", "--png", ...).
FileFormat format_of(const std::string& flag, const std::string& path);

/// Marks a flag or positional as naming files the command reads (IN, --model, --mask FILE[:VAR], ...):
/// check_outputs refuses an output that is one of them. Returns `option`, for chaining.
CLI::Option* input_file(CLI::Option* option);

/// Checks the outputs of a run before any work: InvalidInput naming `what` when two of `paths` are
/// the same file name, or naming the output and the input when an output is a file the command
/// reads (input_file; the same file under another name or a hard link included, and an ENVI
/// output's .hdr/.img beside an ENVI input's); IoError (exit 3) naming the path when its folder is
/// missing, not a folder or not writable (check_output_folder). Empty paths are skipped.
void check_outputs(const std::vector<std::string>& paths, const std::string& what);

/// IoError naming `path` when the folder it would be written in is missing or not writable;
/// InvalidInput when `path` is a file the command reads (input_file).
void check_output_folder(const std::string& path);

/// Removes outputs a failed run wrote (ENVI: the header and the data file as well); never throws.
void remove_outputs(const std::vector<std::string>& paths);

/// Creates a folder and the missing folders above it, remembering which it made, so that a failed
/// run takes them back (remove_made: each made folder, deepest first, when it is empty again).
/// `flag` names the folder in errors ("--out", "--per-band-out"); IoError when it cannot be made.
class MadeFolders {
public:
    void create(const std::string& folder, const std::string& flag);
    void remove_made() const noexcept;

private:
    std::vector<std::string> made_;  // outermost first
};

/// The outputs one run has written so far, for the JSON summary ([{role, path, format, dtype}])
/// and for cleaning up after a failure.
class OutputList {
public:
    // The outputs listed are the run's until the list is destroyed (the command finished): an
    // interruption that stops the process removes them (interrupt.hpp).
    OutputList() = default;
    OutputList(OutputList&& other) noexcept;
    OutputList& operator=(OutputList&&) = delete;
    OutputList(const OutputList&) = delete;
    ~OutputList();
    void add(const std::string& path, const std::string& role, const std::string& format,
             const std::string& dtype = "");
    /// Adds the entry with extra keys (e.g. the display scale of a PNG).
    void add(const std::string& path, nlohmann::json entry);
    /// Removes every output listed (remove_outputs).
    void remove_all() const;
    const nlohmann::json& json() const { return json_; }
    const std::vector<std::string>& paths() const { return paths_; }

private:
    std::vector<std::string> paths_;
    nlohmann::json json_ = nlohmann::json::array();
};

/// The result of a tiled run, filled in place: the first of `outputs` that can be written tile by tile
/// (CubeFileWriter::streamable: .npy, ENVI, GeoTIFF with GDAL) is created at its full size in its folder and the tiles
/// land in it, so the result never has to be held whole in memory; without one (PNG only), a Cube
/// in memory. `shape`'s layout is a wish (the streamed file's own wins: .npy is (H, W, B)). After
/// the run, commit() puts the streamed output in place and lists it in `written` as `entry` says
/// (path, format and "streamed": true added); cube() is the result for the other outputs and the
/// statistics, before or after commit() (reading it pages the file back in). Destroyed without
/// commit(), it leaves nothing.
class InPlaceResult {
public:
    InPlaceResult(const std::vector<std::string>& outputs, const CubeShape& shape, const Metadata& metadata,
                  const WriteOptions& write);
    const MutableCubeView& view() const { return view_; }
    const Cube& cube() const { return cube_; }
    /// The output written in place ("" when none).
    const std::string& streamed_path() const { return path_; }
    void commit(OutputList& written, nlohmann::json entry = nlohmann::json::object());

private:
    std::optional<CubeFileWriter> writer_;
    std::string path_;
    Cube cube_;
    MutableCubeView view_;
};

/// The white point of a one-band float image for display: its 99th percentile over the finite
/// values, so that a few very strong values do not leave the rest black (the largest value when
/// that percentile is 0; 0 when nothing is finite).
double display_white_point(const Cube& one_band);

/// Writes a one-band float image (a gradient) to `path` and lists it in `written` as `role` (none when
/// ""): PNG/PNM scaled for display, round(255 * min(v, white) / white), with `white` the display white
/// point (display_white_point(image) when NaN), its entry carrying the "scale"; other formats as floats.
void write_float_image(const Cube& image, const std::string& path, const std::string& role, const WriteOptions& write,
                       OutputList& written, double white = std::numeric_limits<double>::quiet_NaN());

/// A 0/1 map (u8, any bands) as a file holds it: .npy keeps 0/1; image formats get 255 for a set
/// pixel and 0 otherwise (the reverse with `invert`).
Cube binary_map_for_file(const Cube& maps, const std::string& path, bool invert = false);

/// An 8-bit sRGB colour.
using Rgb = std::array<std::uint8_t, 3>;

/// Colour j (0-based) of a class map and its legend (cluster, classify): Matplotlib's "tab10" for 0-9, the
/// light half of "tab20" for 10-19; beyond, hues stepped by the golden angle, saturation 0.65, brightness
/// 0.95 and 0.75 alternating.
Rgb class_colour(std::int64_t j);

/// Colour of region `label` of a segmentation (watershed, segment): hues stepped by the golden angle through
/// the labels (so that neighbouring labels differ), saturation 0.6, brightness 0.65, 0.8 or 0.95 by label
/// mod 3; label <= 0 (outside the mask, unreached) black.
Rgb region_colour(std::int64_t label);

/// A JSON object as text for files people read: one key per line, and each element of an array
/// of objects on one line of its own.
std::string readable_json(const nlohmann::ordered_json& object);

}  // namespace cubekit::cli
