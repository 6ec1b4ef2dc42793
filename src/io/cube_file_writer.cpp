// CubeFileWriter: an output cube filled in place through a memory map of its temporary file, then
// renamed into place (io.hpp). The headers are the writers' own (npy_header, envi_header), so a
// streamed output reads back exactly like one written whole by write_cube.
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
    return (f == FileFormat::Npy || f == FileFormat::Envi) && host_is_little_endian();
}

bool CubeFileWriter::streamable(const std::filesystem::path& path) { return streamable(path, WriteOptions{}); }

CubeFileWriter::CubeFileWriter(const std::filesystem::path& path, const CubeShape& shape, const Metadata& metadata)
    : CubeFileWriter(path, shape, metadata, WriteOptions{}) {}

CubeFileWriter::CubeFileWriter(const std::filesystem::path& path, const CubeShape& shape, const Metadata& metadata,
                               const WriteOptions& options)
    : state_(std::make_unique<State>()) {
    if (!host_is_little_endian()) throw_invalid(kWriter, path, "outputs are written in place on little-endian hosts only");
    const FileFormat format = options.format == FileFormat::Auto ? output_format(path) : options.format;
    State& s = *state_;
    s.shape = shape;
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
                                         "' cannot be written in place (npy and envi can)");
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
    if (s.header)
        commit_envi_pair(*s.data, *s.header);
    else
        s.data->commit();
    s.committed = true;  // the mapping stays: view() reads the file in place until destruction
}

}  // namespace cubekit
