// NumPy .npy (format versions 1.0, 2.0 and 3.0).
//
// Layout of a file: "\x93NUMPY", major, minor, header length (u16 LE for 1.x, u32 LE for 2.x/3.x),
// then a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (95, 95), }
// padded with spaces and ending in '\n', then the raw array. Cube convention: a 2-D array is
// (H, W), a 3-D one (H, W, B). The result is always BIP (C order is BIP as stored; Fortran order
// is transposed while reading).
#include <cctype>
#include <climits>
#include <cstring>

#include "io/io_internal.hpp"

namespace cubekit::io_detail {

namespace {

constexpr std::string_view kRead = "read_npy";
constexpr std::string_view kWrite = "write_npy";
constexpr char kMagic[] = "\x93NUMPY";

// A Python literal as far as .npy headers need: strings, booleans, None, integers, tuples/lists
// and dicts (a dict is kept as alternating key/value items).
struct PyValue {
    enum Kind { Str, Bool, None, Int, Seq, Dict } kind = None;
    std::string str;
    bool boolean = false;
    long long integer = 0;
    std::vector<PyValue> items;
};

class LiteralParser {
public:
    LiteralParser(const fs::path& path, std::string_view text) : path_(path), s_(text) {}

    PyValue parse_all() {
        PyValue v = value();
        skip_ws();
        if (i_ != s_.size()) fail("unexpected text after the header dict");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& what) {
        throw_invalid(kRead, path_, "malformed header '" + std::string(trim(s_)) + "': " + what);
    }
    void skip_ws() {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    bool eat(char c) {
        skip_ws();
        if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
        return false;
    }
    // Items up to `close`, separated by commas, trailing comma allowed.
    void sequence(char close, PyValue& out, bool dict) {
        while (!eat(close)) {
            out.items.push_back(value());
            if (dict) {
                if (!eat(':')) fail("expected ':' in the dict");
                out.items.push_back(value());
            }
            if (!eat(',')) {
                if (!eat(close)) fail(std::string("expected ',' or '") + close + "'");
                return;
            }
        }
    }
    PyValue value() {
        skip_ws();
        if (i_ >= s_.size()) fail("unexpected end");
        PyValue v;
        const char c = s_[i_];
        if (c == '\'' || c == '"') {
            const std::size_t end = s_.find(c, i_ + 1);
            if (end == std::string_view::npos) fail("unterminated string");
            v.kind = PyValue::Str;
            v.str = std::string(s_.substr(i_ + 1, end - i_ - 1));
            i_ = end + 1;
        } else if (c == '(' || c == '[') {
            ++i_;
            v.kind = PyValue::Seq;
            sequence(c == '(' ? ')' : ']', v, false);
        } else if (c == '{') {
            ++i_;
            v.kind = PyValue::Dict;
            sequence('}', v, true);
        } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
            std::size_t j = i_ + (c == '-');
            long long n = 0;
            for (; j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j])); ++j) {
                if (n > (LLONG_MAX - 9) / 10) fail("integer too large");
                n = n * 10 + (s_[j] - '0');
            }
            if (j < s_.size() && (s_[j] == 'L' || s_[j] == 'l')) ++j;  // Python 2 long suffix
            v.kind = PyValue::Int;
            v.integer = c == '-' ? -n : n;
            i_ = j;
        } else if (s_.substr(i_, 4) == "True") {
            v.kind = PyValue::Bool, v.boolean = true, i_ += 4;
        } else if (s_.substr(i_, 5) == "False") {
            v.kind = PyValue::Bool, v.boolean = false, i_ += 5;
        } else if (s_.substr(i_, 4) == "None") {
            v.kind = PyValue::None, i_ += 4;
        } else {
            fail(std::string("unexpected character '") + c + "'");
        }
        return v;
    }

    const fs::path& path_;
    std::string_view s_;
    std::size_t i_ = 0;
};

struct NpyType {
    const char* code;
    DType dtype;
};
constexpr NpyType kTypes[] = {{"u1", DType::U8},  {"u2", DType::U16}, {"i2", DType::I16}, {"u4", DType::U32},
                              {"i4", DType::I32}, {"f4", DType::F32}, {"f8", DType::F64}};

const char* npy_code(DType t) {
    for (const auto& e : kTypes)
        if (e.dtype == t) return e.code;
    return "";
}

}  // namespace

RawCube describe_npy(const fs::path& path) {
    InputFile file(kRead, path);
    unsigned char pre[12] = {};
    const std::size_t got = file.read_some_at(0, pre, sizeof(pre));
    if (got < 10 || std::memcmp(pre, kMagic, 6) != 0) throw_invalid(kRead, path, "not a .npy file (no \\x93NUMPY signature)");
    const int major = pre[6], minor = pre[7];
    std::uint64_t header_len = 0, header_start = 0;
    if (major == 1) {
        header_len = std::uint64_t(pre[8]) | std::uint64_t(pre[9]) << 8;
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (got < 12) throw_invalid(kRead, path, "truncated header");
        header_len = std::uint64_t(pre[8]) | std::uint64_t(pre[9]) << 8 | std::uint64_t(pre[10]) << 16 |
                     std::uint64_t(pre[11]) << 24;
        header_start = 12;
    } else {
        throw_invalid(kRead, path,
                      "format version " + std::to_string(major) + "." + std::to_string(minor) +
                          " is not supported (1.0, 2.0, 3.0 are)");
    }
    if (header_start + header_len > file.size())
        throw_invalid(kRead, path,
                      "truncated: the header needs " + std::to_string(header_start + header_len) + " bytes, the file has " +
                          std::to_string(file.size()));
    std::string header(std::size_t(header_len), '\0');
    file.read_at(header_start, header.data(), header.size());

    const PyValue dict = LiteralParser(path, header).parse_all();
    if (dict.kind != PyValue::Dict) throw_invalid(kRead, path, "malformed header: not a dict");
    const PyValue* descr = nullptr;
    const PyValue* fortran = nullptr;
    const PyValue* shape = nullptr;
    for (std::size_t i = 0; i + 1 < dict.items.size(); i += 2) {
        const std::string& key = dict.items[i].str;
        if (key == "descr") descr = &dict.items[i + 1];
        if (key == "fortran_order") fortran = &dict.items[i + 1];
        if (key == "shape") shape = &dict.items[i + 1];
    }
    if (!descr || !fortran || !shape) throw_invalid(kRead, path, "malformed header: 'descr', 'fortran_order' and 'shape' are required");
    if (descr->kind != PyValue::Str)
        throw_invalid(kRead, path, "structured dtypes are not supported (u1, u2, i2, u4, i4, f4, f8 are)");
    if (fortran->kind != PyValue::Bool) throw_invalid(kRead, path, "malformed header: 'fortran_order' is not True or False");
    if (shape->kind != PyValue::Seq) throw_invalid(kRead, path, "malformed header: 'shape' is not a tuple");

    // dtype: byte-order character + code. '|' (not applicable) is only valid for one-byte types.
    const std::string& d = descr->str;
    const std::string unsupported = "dtype '" + d + "' is not supported (u1, u2, i2, u4, i4, f4, f8 are)";
    if (d.size() != 3 || !std::strchr("<>|=", d[0]) || d[0] == '\0') throw_invalid(kRead, path, unsupported);
    DType dtype{};
    bool found = false;
    for (const auto& e : kTypes)
        if (d.compare(1, 2, e.code) == 0) dtype = e.dtype, found = true;
    if (!found || (d[0] == '|' && dtype_size(dtype) != 1)) throw_invalid(kRead, path, unsupported);
    const bool file_little = d[0] == '<' || (d[0] == '=' && host_is_little_endian()) || d[0] == '|';

    // Shape: (H, W) or (H, W, B), every extent 1 .. INT_MAX.
    std::string shape_text = "(";
    for (std::size_t i = 0; i < shape->items.size(); ++i) {
        shape_text += (i ? ", " : "") + std::to_string(shape->items[i].integer);
        if (shape->items[i].kind != PyValue::Int) throw_invalid(kRead, path, "malformed header: 'shape' holds a non-integer");
    }
    shape_text += shape->items.size() == 1 ? ",)" : ")";
    const std::size_t rank = shape->items.size();
    if (rank != 2 && rank != 3)
        throw_invalid(kRead, path,
                      "shape " + shape_text + " has " + std::to_string(rank) +
                          " dimensions; 2 (H, W) or 3 (H, W, B) are accepted");
    for (const auto& it : shape->items)
        if (it.integer <= 0 || it.integer > INT_MAX)
            throw_invalid(kRead, path, "shape " + shape_text + " has an extent outside 1 .. " + std::to_string(INT_MAX));
    const int H = int(shape->items[0].integer), W = int(shape->items[1].integer);
    const int B = rank == 3 ? int(shape->items[2].integer) : 1;

    const std::size_t esize = dtype_size(dtype);
    std::size_t count = 0, bytes = 0;
    if (__builtin_mul_overflow(std::size_t(H) * std::size_t(W), std::size_t(B), &count) ||
        __builtin_mul_overflow(count, esize, &bytes))
        throw_invalid(kRead, path, "shape " + shape_text + " is too large to address");
    const std::uint64_t offset = header_start + header_len;
    if (file.size() - offset < bytes)
        throw_invalid(kRead, path,
                      "truncated: shape " + shape_text + " of " + d + " needs " + std::to_string(bytes) +
                          " bytes of data after the " + std::to_string(offset) + "-byte header, the file has " +
                          std::to_string(file.size() - offset));

    RawCube raw;
    raw.data = path;
    raw.offset = offset;
    raw.shape = CubeShape{W, H, B, dtype, Layout::BIP};  // C order (H, W, B) is exactly BIP
    raw.fortran = fortran->boolean;
    raw.swap = file_little != host_is_little_endian();
    return raw;
}

Cube read_npy(const fs::path& path) {
    const RawCube raw = describe_npy(path);
    const int W = raw.shape.width, H = raw.shape.height, B = raw.shape.bands;
    const DType dtype = raw.shape.dtype;
    const std::size_t bytes = raw.shape.num_bytes(), count = raw.shape.num_elements();
    const std::uint64_t offset = raw.offset;
    const InputFile file(kRead, path);
    Cube cube = Cube::uninitialized(W, H, B, dtype, Layout::BIP);  // every byte is read or scattered below
    if (!raw.fortran) {
        file.read_at(offset, cube.bytes(), bytes);  // C order (H, W, B) is exactly BIP
    } else {
        // Fortran order: element (h, w, b) is at h + H*(w + W*b) — column-major within each band,
        // so it is neither BSQ nor BIP; scatter each element to its BIP place.
        Cube tmp = Cube::uninitialized(W, H, B, dtype, Layout::BIP);  // a typed, aligned buffer of the right size
        file.read_at(offset, tmp.bytes(), bytes);
        visit_dtype(dtype, [&](auto tag) {
            using T = decltype(tag);
            const T* src = tmp.data<T>();
            T* dst = cube.data<T>();
            const std::size_t Hs = std::size_t(H), Ws = std::size_t(W), Bs = std::size_t(B);
            for (std::size_t b = 0; b < Bs; ++b)
                for (std::size_t w = 0; w < Ws; ++w)
                    for (std::size_t h = 0; h < Hs; ++h) dst[(h * Ws + w) * Bs + b] = src[h + Hs * (w + Ws * b)];
        });
    }
    if (raw.swap) byteswap_inplace(cube.bytes(), count, dtype_size(dtype));
    return cube;
}

std::string npy_header(const CubeShape& shape, const fs::path& path) {
    if (shape.width <= 0 || shape.height <= 0 || shape.bands <= 0)
        throw_invalid(kWrite, path, "the cube is empty (" + shape.describe() + ")");
    const std::string descr = std::string(shape.dtype == DType::U8 ? "|" : "<") + npy_code(shape.dtype);
    std::string dims = "(" + std::to_string(shape.height) + ", " + std::to_string(shape.width);
    if (shape.bands > 1) dims += ", " + std::to_string(shape.bands);
    dims += ")";
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + dims + ", }";
    // Pad with spaces and a final newline so that the data starts on a 64-byte boundary (what
    // numpy itself writes since 1.14; older readers accept it too).
    const std::size_t prefix = 10;  // magic, version, u16 length
    std::size_t total = prefix + dict.size() + 1;
    total = (total + 63) / 64 * 64;
    dict.append(total - prefix - dict.size() - 1, ' ');
    dict += '\n';
    if (dict.size() > 65535) throw_invalid(kWrite, path, "internal error: header too long for format 1.0");
    const char pre[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, char(dict.size() & 0xFF), char(dict.size() >> 8)};
    return std::string(pre, sizeof(pre)) + dict;
}

void write_npy(const Cube& cube, const fs::path& path) {
    const std::string header = npy_header(cube.shape(), path);
    Cube converted;
    const Cube* src = &cube;
    if (cube.layout() != Layout::BIP && cube.bands() > 1) {
        converted = cube.to_layout(Layout::BIP);
        src = &converted;
    }
    AtomicFile out(kWrite, path);
    out.write(header);
    out.write_cube_le(*src);
    out.commit();
}

}  // namespace cubekit::io_detail
