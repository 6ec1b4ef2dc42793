#pragma once
// The moment tables of `cubekit zernike` and `cubekit zernike-reconstruct`: CSV (header
// `band,n,m,re,im,abs`, a leading `image` column for batches, %.17g) and JSON (the rows plus the
// disk: width, height, mapping, centre, radius, normalisation, pixel count, ...), written by the
// first command and read back by the second; and the image file of a reconstruction (PNG scaled
// or clamped, or .npy f64).
#include <nlohmann/json.hpp>

#include <complex>
#include <string>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/zernike.hpp"

namespace cubekit::cli {

/// One input file of a run and the bands it gave to the stacked cube, in order.
struct ZernikeSource {
    std::string name;        ///< the `image` column (the file name; "" for a single input)
    std::string path;        ///< as given
    std::vector<int> bands;  ///< the file's band indices (the `band` column)
};

/// What `cubekit zernike` computed: the moments of every stacked band, and where each band came from.
struct ZernikeTable {
    ZernikeMoments moments;
    std::vector<ZernikeSource> sources;
    bool batch = false;  ///< rows carry the `image` column
    std::string mode;    ///< "set", "order" or "moment"
    std::string dtype;   ///< element type of the (stacked) input
    /// (source index, band) of stacked band s.
    std::pair<int, int> origin(int s) const;
};

/// The CSV text (header and rows, canonical order: image, band, then the library's index order).
std::string zernike_csv(const ZernikeTable& t);
/// The moments file `-o FILE.json` (keys: format, width, height, mapping, center_x, center_y,
/// radius, normalization, pixel_count, max_order, mode, method, radial, precision, symmetric,
/// dtype, images (batches), moments).
nlohmann::ordered_json zernike_json_file(const ZernikeTable& t);
/// The rows as JSON objects {image?, band, n, m, re, im, abs} (for the --json summary).
nlohmann::json zernike_rows_json(const ZernikeTable& t);

/// A moments file read back: the rows and whatever the file says about the disk.
struct MomentFile {
    struct Row {
        std::string image;  ///< "" without the image column
        int band = 0;
        ZernikeIndex index;
        std::complex<double> value;
    };
    std::string path;
    bool json = false;
    bool batch = false;                  ///< the rows have an image column
    int width = 0, height = 0;           ///< 0 = unknown (CSV)
    ZernikeOptions options;              ///< mapping, centre, radius, normalisation
    std::string dtype;                   ///< input element type, "" = unknown (CSV)
    std::vector<Row> rows;
};

/// Reads a CSV or JSON moments file (chosen by the extension, .csv or .json). IoError when the
/// file cannot be read; InvalidInput naming `flag`, the file and the line or key otherwise.
MomentFile read_moment_file(const std::string& path, const std::string& flag);

/// How a PNG maps back to values: value = min + png / (2^bits − 1) · (max − min).
struct PngScale {
    int bits = 16;
    double min = 0.0, max = 0.0;
    nlohmann::json json() const { return {{"bits", bits}, {"min", min}, {"max", max}}; }
};

/// Throws InvalidInput naming `flag` unless `path` ends in .png or .npy (case-insensitive).
void check_image_output(const std::string& path, const std::string& flag);

/// Writes a reconstruction: .npy = every band of `rebuilt` as f64; .png = band `band` with
/// bits = 8 (values rounded and clamped to 0..255) or 16 (min–max over the disk's pixels scaled to
/// 0..65535, pixels outside the disk 0), written with `write` (--png-compression). Returns the scale
/// of the PNG (bits 0 for .npy). Atomic.
PngScale write_reconstruction(const Cube& rebuilt, int band, const ZernikeDisk& disk, int bits, const std::string& path,
                              const WriteOptions& write);

}  // namespace cubekit::cli
