#pragma once
/// Private parts of the PNG reader and writer (png.cpp, png_decode.cpp, png_encode.cpp), declared
/// here so that tests can compare the two decoders and check the encoder's output directly.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/io_internal.hpp"

namespace cubekit::io_detail {

// ---- reading ------------------------------------------------------------------------------------

/// True when the library was built with libdeflate (CUBEKIT_HAVE_LIBDEFLATE), i.e. when
/// decode_png_fast can decode anything at all.
bool png_fast_decoder_built();

/// The fast decoder: libdeflate's whole-buffer inflate (about twice zlib's speed, which is most of
/// libpng's time) and our own unfiltering, for the common PNGs: not interlaced, 8 or 16 bits,
/// gray, gray+alpha, RGB or RGBA. Gives the same cube as libpng. Anything else (palette, 1/2/4-bit,
/// interlaced, an unknown critical chunk) and any fault of the file (a bad CRC, a truncated or
/// damaged zlib stream, a wrong amount of image data) gives nullopt, and read_png hands the file to
/// libpng, which decodes it or reports the error in its own words: this decoder changes neither
/// what is accepted nor the messages. `file` is the whole file.
std::optional<Cube> decode_png_fast(const std::string& file);

/// libpng alone (what read_png does when decode_png_fast declines), from the whole file in memory.
Cube decode_png_libpng(const fs::path& path, const std::string& file);

// ---- writing ------------------------------------------------------------------------------------

/// An image for encode_png: `height` rows of `width` pixels, `stride` bytes apart. 16-bit samples
/// are in host order; a palette image (color 3) has one index byte per pixel at any depth.
struct PngImage {
    const unsigned char* rows = nullptr;
    std::size_t stride = 0;
    std::uint32_t width = 0, height = 0;
    int depth = 8;  ///< PNG bit depth: 8 or 16; 1, 2, 4 or 8 for a palette image
    int color = 0;  ///< PNG colour type: 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA
    std::vector<std::array<std::uint8_t, 3>> palette;  ///< PLTE (color 3)
    std::vector<std::uint8_t> alpha;                   ///< tRNS (color 3), may be empty
};

/// zlib settings of encode_png.
struct PngDeflate {
    int level = 1;     ///< zlib level
    int strategy = 0;  ///< Z_DEFAULT_STRATEGY, Z_RLE...
};

/// Writes `image` as a PNG to `out`: rows filtered with Sub (palette images: None, as the PNG
/// specification advises), compressed in strips of rows on OpenMP threads (omp_get_max_threads())
/// into one zlib stream, as pigz does: each strip is a raw deflate stream primed with the 32 KiB
/// before it and ended with a sync flush, and the Adler-32 of the strips are combined. The strips
/// depend on the image size only, so the file is the same for every thread count. Throws
/// std::bad_alloc when zlib cannot get memory; the file's own errors are AtomicFile's.
void encode_png(const PngImage& image, AtomicFile& out, const PngDeflate& deflate);

}  // namespace cubekit::io_detail
