// CubeFileWriter: an output cube filled in place through a memory map of its temporary file, then
// renamed into place (io.hpp). The headers are the writers' own (npy_header, envi_header), so a
// streamed output reads back exactly like one written whole by write_cube. A GeoTIFF (through GDAL)
// cannot be filled in place: its samples go to a scratch file mapped the same way (planes in
// order, beside the target), and commit() has GDAL write the GeoTIFF from the mapping (GDAL's
// block cache bounds its memory; the pages of the mapping are the file's), then drops the scratch.
#include <optional>

#include "io/io_internal.hpp"

namespace cubekit {

using namespace io_detail;

namespace {

constexpr std::string_view kWriter = "CubeFileWriter";

}  // namespace

struct CubeFileWriter::State {
    CubeShape shape;
    MutableCubeView view;
    std::optional<AtomicFile> data;
    std::optional<AtomicFile> header;  // ENVI only
    std::optional<AtomicFile> scratch; // GeoTIFF only: the samples, never renamed into place
    std::filesystem::path tiff;        // GeoTIFF only: the target
    Metadata georeference;             // GeoTIFF only
    bool committed = false;
};

bool CubeFileWriter::streamable(const std::filesystem::path& path, const WriteOptions& options) {
    FileFormat f = options.format;
    if (f == FileFormat::Auto) {
        try {
            f = output_format(path);
        } catch (const InvalidInput&) {
            return false;
        }
    }
    return ((f == FileFormat::Npy || f == FileFormat::Envi) && host_is_little_endian()) ||
           (f == FileFormat::Gdal && gdal_available());
}

bool CubeFileWriter::streamable(const std::filesystem::path& path) { return streamable(path, WriteOptions{}); }

CubeFileWriter::CubeFileWriter(const std::filesystem::path& path, const CubeShape& shape, const Metadata& metadata)
    : CubeFileWriter(path, shape, metadata, WriteOptions{}) {}

CubeFileWriter::CubeFileWriter(const std::filesystem::path& path, const CubeShape& shape, const Metadata& metadata,
                               const WriteOptions& options)
    : state_(std::make_unique<State>()) {
    const FileFormat format = options.format == FileFormat::Auto ? output_format(path) : options.format;
    State& s = *state_;
    s.shape = shape;
    if (format == FileFormat::Gdal) {
        if (!gdal_available()) throw_invalid(kWriter, path, "GeoTIFF output needs GDAL, which this cubekit cannot load");
        s.shape.layout = Layout::BSQ;
        s.tiff = path;
        s.georeference = metadata.georeference();
        s.scratch.emplace(kWriter, path);  // its temporary, beside the target, is removed on destruction
        std::byte* base = s.scratch->map(s.shape.num_bytes());
        s.view = MutableCubeView::host(base, s.shape.width, s.shape.height, s.shape.bands, s.shape.dtype,
                                       dense_strides(s.shape.width, s.shape.height, s.shape.bands, Layout::BSQ));
        return;
    }
    if (!host_is_little_endian()) throw_invalid(kWriter, path, "outputs are written in place on little-endian hosts only");
    std::string header;
    std::filesystem::path data_path = path;
    if (format == FileFormat::Npy) {
        s.shape.layout = shape.bands > 1 ? Layout::BIP : Layout::BSQ;  // C order (H, W, B)
        header = npy_header(s.shape, path);
    } else if (format == FileFormat::Envi) {
        if (!options.envi_keep_layout) s.shape.layout = options.envi_layout;
        const std::string text = envi_header(s.shape, s.shape.layout, metadata, path);
        const auto [data, hdr] = envi_output_paths(path);
        data_path = data;
        s.header.emplace(kWriter, hdr);
        s.header->write(text);
    } else {
        throw_invalid(kWriter, path, "format '" + std::string(format_name(format)) +
                                         "' cannot be written in place (npy, envi and GeoTIFF can)");
    }
    s.data.emplace(kWriter, data_path);
    s.data->write(header);
    std::byte* base = s.data->map(header.size() + s.shape.num_bytes());
    s.view = MutableCubeView::host(base + header.size(), s.shape.width, s.shape.height, s.shape.bands, s.shape.dtype,
                                   dense_strides(s.shape.width, s.shape.height, s.shape.bands, s.shape.layout));
}

CubeFileWriter::~CubeFileWriter() = default;
CubeFileWriter::CubeFileWriter(CubeFileWriter&&) noexcept = default;
CubeFileWriter& CubeFileWriter::operator=(CubeFileWriter&&) noexcept = default;

const MutableCubeView& CubeFileWriter::view() const { return state_->view; }
const CubeShape& CubeFileWriter::shape() const { return state_->shape; }

void CubeFileWriter::commit() {
    State& s = *state_;
    if (s.committed) throw InvalidInput(std::string(kWriter) + ": commit() called twice");
    if (s.scratch)
        write_gdal_planes(static_cast<const std::byte*>(s.view.data()), s.shape, s.georeference, s.tiff);
    else if (s.header)
        commit_envi_pair(*s.data, *s.header);
    else
        s.data->commit();
    s.committed = true;  // the mapping stays: view() reads the file (GeoTIFF: the scratch) until destruction
}

}  // namespace cubekit
