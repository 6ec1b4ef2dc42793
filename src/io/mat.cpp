// MATLAB .mat (read only) through matio: v4, v5 (compressed or not) and v7.3 (HDF5).
//
// Orientation: a MATLAB array of size R×C×B is a cube of height R and width C, pixel (x, y) =
// data(y+1, x+1, :). MATLAB stores column-major: element (r, c, b) is at r + R*(c + C*b), so
// within a band the row index varies fastest. cubekit's BSQ is row-major within a band
// ((b*H + y)*W + x), hence every band is transposed while copying. The result is BSQ.
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>

#include <matio.h>
#include <zlib.h>

#include "io/io_internal.hpp"

namespace cubekit::io_detail {

namespace {

constexpr std::string_view kRead = "read_mat";

// matio keeps global state (its logger) and, for v7.3 files, calls HDF5, which is not
// thread-safe unless built so. One lock around our use of matio keeps concurrent reads safe.
std::mutex& matio_mutex() {
    static std::mutex m;
    return m;
}

struct MatClose {
    void operator()(mat_t* m) const { Mat_Close(m); }
};
struct VarFree {
    void operator()(matvar_t* v) const { Mat_VarFree(v); }
};
using MatPtr = std::unique_ptr<mat_t, MatClose>;
using VarPtr = std::unique_ptr<matvar_t, VarFree>;

// A variable name as messages show it: valid UTF-8 as it is, other bytes and control characters as
// \xNN (names written by other tools need not be ASCII), an empty name as "(unnamed)".
std::string shown_name(const std::string& name) {
    if (name.empty()) return "(unnamed)";
    std::string out;
    const auto* p = reinterpret_cast<const unsigned char*>(name.data());
    const std::size_t n = name.size();
    const auto hex = [&](unsigned char c) {
        static constexpr char digits[] = "0123456789abcdef";
        out += "\\x";
        out += digits[c >> 4];
        out += digits[c & 15];
    };
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = p[i];
        const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool valid = len > 0 && i + len <= n;
        for (std::size_t k = 1; valid && k < len; ++k) valid = (p[i + k] & 0xC0) == 0x80;
        if (!valid || c < 0x20 || c == 0x7F) {
            hex(c);
            ++i;
            continue;
        }
        out.append(name, i, len);
        i += len;
    }
    return out;
}

struct VarInfo {
    std::string name;
    std::vector<std::size_t> dims;
    matio_classes cls = MAT_C_EMPTY;
    bool logical = false;
    bool complex = false;

    /// Unnamed variables are MATLAB's hidden subsystem data (function handles, objects), never an image.
    bool numeric() const { return cls >= MAT_C_DOUBLE && cls <= MAT_C_UINT64 && !name.empty(); }
    bool empty() const {
        for (std::size_t d : dims)
            if (d == 0) return true;
        return dims.empty();
    }
    std::string shape() const {
        std::string s;
        for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
        return s;
    }
    std::string type() const {
        static const char* const names[] = {"empty", "cell",  "struct", "object", "char",  "sparse",
                                            "double", "single", "int8",  "uint8",  "int16", "uint16",
                                            "int32",  "uint32", "int64", "uint64", "function", "opaque"};
        std::string t = logical ? "logical" : (int(cls) >= 0 && int(cls) < 18 ? names[cls] : "unknown");
        return complex ? "complex " + t : t;
    }
    std::string describe() const { return shown_name(name) + " (" + shape() + " " + type() + ")"; }
};

// A version 4 file (no "MATLAB" text header, no HDF5 signature) is a sequence of records: five
// int32 (type MOPT, rows, columns, imaginary flag, name length), the name, the samples. matio trusts
// the lengths (a name length of 2 GB is allocated before the file is found short), so the records
// are walked here first: every length must fit in the file.
void check_v4_records(std::string_view fn, const fs::path& path, const InputFile& file) {
    unsigned char head[520] = {};
    const std::size_t got = file.read_some_at(0, head, sizeof head);
    if ((got >= 7 && std::memcmp(head, "MATLAB ", 7) == 0) || (got >= 520 && std::memcmp(head + 512, "\x89HDF\r\n\x1a\n", 8) == 0))
        return;  // v5 / v7.3: matio checks those
    const std::uint64_t size = file.size();
    for (std::uint64_t at = 0; at < size;) {
        unsigned char w[20];
        if (size - at < 20 || file.read_some_at(at, w, 20) != 20)
            throw_invalid(fn, path, "a MATLAB v4 record header is cut short at byte " + std::to_string(at));
        // The type (< 2^16) has two zero high bytes: first in a big-endian file (M = 1), last in a
        // little-endian one (M = 0; type 0 is all zero and little-endian).
        const bool big = w[0] == 0 && w[1] == 0 && (w[2] != 0 || w[3] != 0);
        const auto word = [&](int i) {
            const unsigned char* b = w + 4 * i;
            return std::int32_t(big ? std::uint32_t(b[0]) << 24 | std::uint32_t(b[1]) << 16 | std::uint32_t(b[2]) << 8 | b[3]
                                    : std::uint32_t(b[3]) << 24 | std::uint32_t(b[2]) << 16 | std::uint32_t(b[1]) << 8 | b[0]);
        };
        const std::int32_t type = word(0), rows = word(1), cols = word(2), imag = word(3), namelen = word(4);
        const int p = type / 10 % 10;
        if (type < 0 || type / 1000 != (big ? 1 : 0) || type / 100 % 10 != 0 || p > 5 || type % 10 > 2 || rows < 0 || cols < 0 ||
            (imag != 0 && imag != 1) || namelen < 1 || namelen > 65536)
            throw_invalid(fn, path, "not a MATLAB file: the v4 record at byte " + std::to_string(at) +
                                        " has type " + std::to_string(type) + ", " + std::to_string(rows) + "x" +
                                        std::to_string(cols) + ", name length " + std::to_string(namelen));
        static constexpr int kSize[] = {8, 4, 4, 2, 2, 1};
        const std::uint64_t samples = std::uint64_t(rows) * std::uint64_t(cols) * std::uint64_t(kSize[p]) * (imag ? 2u : 1u);
        const std::uint64_t end = at + 20 + std::uint64_t(namelen) + samples;
        if (end > size)
            throw_invalid(fn, path, "the MATLAB v4 variable at byte " + std::to_string(at) + " (" + std::to_string(rows) + "x" +
                                        std::to_string(cols) + ") needs " + std::to_string(end) + " bytes; the file has " +
                                        std::to_string(size));
        at = end;
    }
}

// A version 5 file: a 128-byte header, then top-level elements (tag: type, byte count; miMATRIX
// = 14 as it is, miCOMPRESSED = 15 deflated). matio allocates what an array claims (its dimensions,
// its name, a cell's or struct's elements) before checking that the file holds it, so every array
// is walked here first, nested ones too: each claim must fit in the bytes of its element.
class V5Walker {
public:
    explicit V5Walker(bool swap) : swap_(swap) {}

    // The array element at b[0..n) (its tag included): "" when every claim fits, else the reason.
    std::string walk(const unsigned char* b, std::size_t n, int depth = 0) const {
        if (n < 8 || u32(b) != 14) return "";  // not an array: matio refuses it by type
        if (depth > 32) return "arrays nested more than 32 deep";
        const std::uint32_t bytes = u32(b + 4);
        if (bytes > n - 8) return "an array claims " + std::to_string(bytes) + " bytes; its element holds " + std::to_string(n - 8);
        Cursor c{b + 8, bytes};
        Sub flags, dims, name;
        if (!next(c, flags) || !next(c, dims) || !next(c, name)) return c.error;
        // The layout MATLAB and matio write: flags 8 bytes of miUINT32, dimensions miINT32 (two or
        // more), the name miINT8; a known class. Anything else is damage matio would misread.
        if (flags.type != 6 || flags.len != 8) return "the array flags are not 8 bytes of miUINT32";
        if (dims.type != 5 || dims.len < 8 || dims.len % 4 != 0) return "the dimensions are not two or more miINT32";
        if (name.type != 1) return "the name is not miINT8";
        const unsigned cls = u32(flags.data) & 0xFF;
        if (cls < 1 || cls > 17) return "unknown array class " + std::to_string(cls);
        long double count = 1;
        for (std::size_t i = 0; i + 4 <= dims.len; i += 4) {
            const auto d = std::int32_t(u32(dims.data + i));
            if (d < 0) return "a dimension is negative (" + std::to_string(d) + ")";
            count *= d;
        }
        if (cls == 5 || cls > 15) return "";  // sparse (dimensions need not be stored), functions, opaque
        std::size_t fields = 1;
        if (cls == 2 || cls == 3) {  // struct, object: [class name,] field name length, names
            Sub class_name, length, names;
            if (cls == 3 && !next(c, class_name)) return c.error;
            if (!next(c, length) || !next(c, names)) return c.error;
            const std::uint32_t each = length.len >= 4 ? u32(length.data) : 0;
            fields = each == 0 ? 0 : names.len / each;
        }
        if (cls == 1 || cls == 2 || cls == 3) {  // every element (and field) is an array of 8 bytes or more
            if (count * fields * 8 > c.left)
                return "a cell or struct claims " + std::to_string(static_cast<unsigned long long>(std::min(count * fields, 1e19L))) +
                       " elements; its " + std::to_string(c.left) + " bytes hold fewer";
            for (long double i = 0; i < count * fields; ++i) {
                if (c.left < 8) return "a cell or struct ends before its elements";
                const std::string why = walk(c.at, c.left, depth + 1);
                if (!why.empty()) return why;
                const std::size_t step = 8 + std::size_t(u32(c.at + 4));
                c.at += step, c.left -= std::min(step, c.left);
            }
            return "";
        }
        Sub real;  // char, logical, numeric: the samples, at least a byte each
        if (!next(c, real)) return c.error;
        if (count > real.len)
            return "an array claims " + std::to_string(static_cast<unsigned long long>(std::min(count, 1e19L))) + " elements; its data holds " +
                   std::to_string(real.len) + " bytes";
        return "";
    }

private:
    struct Cursor {
        const unsigned char* at;
        std::size_t left;
        std::string error;
    };
    struct Sub {
        const unsigned char* data = nullptr;
        std::size_t len = 0;
        std::uint32_t type = 0;
    };
    std::uint32_t u32(const unsigned char* b) const {
        const std::uint32_t v = std::uint32_t(b[0]) | std::uint32_t(b[1]) << 8 | std::uint32_t(b[2]) << 16 | std::uint32_t(b[3]) << 24;
        return swap_ ? __builtin_bswap32(v) : v;
    }
    // The next sub-element (small ones pack up to 4 bytes into their tag); false when it does not fit.
    bool next(Cursor& c, Sub& s) const {
        if (c.left < 8) {
            c.error = "an array ends inside its header";
            return false;
        }
        const std::uint32_t type = u32(c.at);
        if ((type >> 16) != 0) {
            if ((type >> 16) > 4) {
                c.error = "a packed sub-element claims " + std::to_string(type >> 16) + " bytes (at most 4 fit)";
                return false;
            }
            s = {c.at + 4, std::size_t(type >> 16), type & 0xFFFF};
            c.at += 8, c.left -= 8;
            return true;
        }
        const std::size_t len = u32(c.at + 4), padded = (len + 7) & ~std::size_t(7);
        if (len > c.left - 8) {
            c.error = "a sub-element claims " + std::to_string(len) + " bytes; " + std::to_string(c.left - 8) + " are left in its array";
            return false;
        }
        s = {c.at + 8, len, type};
        c.at += 8 + std::min(padded, c.left - 8), c.left -= 8 + std::min(padded, c.left - 8);
        return true;
    }
    bool swap_;
};

// Arrays larger than this (as stored, or inflated) are not walked: their claims are matio's to check.
constexpr std::size_t kWalkLimit = std::size_t(64) << 20;

void check_v5_elements(std::string_view fn, const fs::path& path, const InputFile& file) {
    unsigned char head[128];
    if (file.read_some_at(0, head, 128) != 128 || std::memcmp(head, "MATLAB ", 7) != 0) return;
    bool swap = false;
    if (head[126] == 'M' && head[127] == 'I') swap = true;
    else if (head[126] != 'I' || head[127] != 'M') return;  // not v5 (v7.3 is HDF5: matio decides)
    const V5Walker walker(swap);
    const auto u32 = [&](const unsigned char* b) {
        const std::uint32_t v = std::uint32_t(b[0]) | std::uint32_t(b[1]) << 8 | std::uint32_t(b[2]) << 16 | std::uint32_t(b[3]) << 24;
        return swap ? __builtin_bswap32(v) : v;
    };
    const std::uint64_t size = file.size();
    for (std::uint64_t at = 128; at + 8 <= size;) {
        unsigned char tag[8];
        file.read_some_at(at, tag, 8);
        const std::uint32_t type = u32(tag), bytes = u32(tag + 4);
        if ((type >> 16) != 0) break;  // a small element at top level: not an array; matio decides
        if (at + 8 + bytes > size)
            throw_invalid(fn, path, "the element at byte " + std::to_string(at) + " claims " + std::to_string(bytes) +
                                        " bytes; the file has " + std::to_string(size - at - 8) + " after it (truncated or damaged)");
        std::vector<unsigned char> array;
        if (type == 14 && bytes + 8 <= kWalkLimit) {
            array.resize(8 + bytes);
            file.read_some_at(at, array.data(), array.size());
        } else if (type == 15) {  // inflated, up to the walk limit
            std::vector<unsigned char> packed(bytes);
            file.read_some_at(at + 8, packed.data(), packed.size());
            array.resize(std::min<std::size_t>(kWalkLimit, std::max<std::size_t>(4096, std::size_t(bytes) * 8)));
            z_stream z{};
            if (inflateInit(&z) == Z_OK) {
                z.next_in = packed.data(), z.avail_in = uInt(packed.size());
                std::size_t got = 0;
                int rc = Z_OK;
                while (rc == Z_OK) {
                    if (got == array.size()) {
                        if (array.size() == kWalkLimit) break;
                        array.resize(std::min(kWalkLimit, array.size() * 2));
                    }
                    z.next_out = array.data() + got, z.avail_out = uInt(array.size() - got);
                    rc = inflate(&z, Z_NO_FLUSH);
                    got = array.size() - z.avail_out;
                }
                inflateEnd(&z);
                // The whole array, or a damaged stream cut short (whose claims beyond its bytes are
                // refused); an array beyond the walk limit is not walked.
                array.resize(rc == Z_STREAM_END || got < kWalkLimit ? got : 0);
            }
        }
        if (const std::string why = walker.walk(array.data(), array.size()); !why.empty())
            throw_invalid(fn, path, "the variable at byte " + std::to_string(at) + ": " + why + " (damaged file)");
        at += 8 + (type == 15 ? std::uint64_t(bytes) : (std::uint64_t(bytes) + 7) & ~std::uint64_t(7));
    }
}

MatPtr open_mat(std::string_view fn, const fs::path& path) {
    const InputFile probe(fn, path);  // IoError with strerror when missing or unreadable; matio gives no errno
    check_v4_records(fn, path, probe);
    check_v5_elements(fn, path, probe);
    MatPtr mat(Mat_Open(path.c_str(), MAT_ACC_RDONLY));
    if (!mat) throw_invalid(fn, path, "not a MATLAB file that matio can read (v4, v5 or v7.3 are)");
    return mat;
}

std::vector<VarInfo> scan(mat_t* mat) {
    std::vector<VarInfo> vars;
    Mat_Rewind(mat);
    while (matvar_t* raw = Mat_VarReadNextInfo(mat)) {
        VarPtr v(raw);
        VarInfo info;
        info.name = v->name ? v->name : "";
        for (int i = 0; i < v->rank; ++i) info.dims.push_back(v->dims[i]);
        info.cls = v->class_type;
        info.logical = v->isLogical != 0;
        info.complex = v->isComplex != 0;
        vars.push_back(std::move(info));
    }
    return vars;
}

std::string join_described(const std::vector<const VarInfo*>& vars) {
    std::string s;
    for (std::size_t i = 0; i < vars.size(); ++i) s += (i ? ", " : "") + vars[i]->describe();
    return s;
}

std::vector<const VarInfo*> numeric_vars(const std::vector<VarInfo>& vars) {
    std::vector<const VarInfo*> out;
    for (const auto& v : vars)
        if (v.numeric()) out.push_back(&v);
    return out;
}

const VarInfo& choose(const fs::path& path, const std::vector<VarInfo>& vars, const std::string& var) {
    const auto numeric = numeric_vars(vars);
    const std::string listing = numeric.empty() ? "none" : join_described(numeric);
    if (!var.empty()) {
        for (const auto& v : vars) {
            if (v.name != var) continue;
            if (!v.numeric())
                throw_invalid(kRead, path, "variable '" + shown_name(var) + "' is a " + v.type() + " array, not numeric (numeric variables: " + listing + ")");
            if (v.dims.size() != 2 && v.dims.size() != 3)
                throw_invalid(kRead, path, "variable '" + shown_name(var) + "' is " + v.shape() + "; 2-D (R x C) or 3-D (R x C x B) arrays are accepted");
            return v;
        }
        throw_invalid(kRead, path, "no variable '" + shown_name(var) + "' (numeric variables: " + listing + ")");
    }
    std::vector<const VarInfo*> three, two;
    for (const VarInfo* v : numeric) {
        if (v->empty()) continue;
        if (v->dims.size() == 3) three.push_back(v);
        if (v->dims.size() == 2) two.push_back(v);
    }
    if (three.size() == 1) return *three[0];
    if (three.size() > 1)
        throw_invalid(kRead, path, std::to_string(three.size()) + " 3-D arrays, choose one with var: " + join_described(three));
    if (two.size() == 1) return *two[0];
    if (two.size() > 1)
        throw_invalid(kRead, path, "no 3-D array and " + std::to_string(two.size()) + " 2-D arrays, choose one with var: " + join_described(two));
    throw_invalid(kRead, path, "no non-empty 2-D or 3-D numeric array (numeric variables: " + listing + ")");
}

// Copies a column-major R×C×B array into a BSQ cube (transposing each band), converting the
// element type from S to T (only int8 → int16 actually changes it).
template <typename S, typename T>
void copy_transposed(const void* data, Cube& cube) {
    const auto* src = static_cast<const S*>(data);
    T* dst = cube.data<T>();
    const std::size_t R = std::size_t(cube.height()), C = std::size_t(cube.width()), B = std::size_t(cube.bands());
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t c = 0; c < C; ++c)
            for (std::size_t r = 0; r < R; ++r) dst[(b * R + r) * C + c] = T(src[r + R * (c + C * b)]);
}

}  // namespace

Cube read_mat(const fs::path& path, const std::string& var) {
    std::lock_guard lock(matio_mutex());
    MatPtr mat = open_mat(kRead, path);
    const std::vector<VarInfo> vars = scan(mat.get());
    const VarInfo& info = choose(path, vars, var);
    const std::string what = "variable '" + shown_name(info.name) + "' (" + info.shape() + " " + info.type() + ")";
    if (info.complex) throw_invalid(kRead, path, what + ": complex arrays are not supported");
    if (info.cls == MAT_C_INT64 || info.cls == MAT_C_UINT64)
        throw_invalid(kRead, path, what + ": 64-bit integers are not supported (double, single, int8, uint8, int16, uint16, int32, uint32, logical are)");
    if (info.empty()) throw_invalid(kRead, path, what + " is empty");
    for (std::size_t d : info.dims)
        if (d > std::size_t(INT_MAX)) throw_invalid(kRead, path, what + " is too large (an extent above " + std::to_string(INT_MAX) + ")");

    // A variable's samples cannot outweigh the file by more than zlib's best ratio (about 1032:1, for
    // compressed v5 and v7.3 data): a header claiming more is refused before matio allocates it.
    const std::uint64_t file_bytes = InputFile(kRead, path).size();
    long double claimed = info.cls == MAT_C_DOUBLE || info.cls == MAT_C_INT64 || info.cls == MAT_C_UINT64 ? 8
                          : info.cls == MAT_C_SINGLE || info.cls == MAT_C_INT32 || info.cls == MAT_C_UINT32 ? 4
                          : info.cls == MAT_C_INT16 || info.cls == MAT_C_UINT16 ? 2 : 1;
    for (std::size_t d : info.dims) claimed *= static_cast<long double>(d);
    if (claimed > 1100.0L * static_cast<long double>(file_bytes) + 4096.0L)
        throw_invalid(kRead, path, what + " claims " + std::to_string(static_cast<unsigned long long>(std::min(claimed, 1e19L))) +
                                       " bytes of samples, more than a " + std::to_string(file_bytes) +
                                       "-byte file can hold even compressed (damaged or truncated file)");
    VarPtr v(Mat_VarRead(mat.get(), info.name.c_str()));
    if (!v || !v->data) throw_invalid(kRead, path, "matio could not read " + what + " (damaged or unsupported storage)");
    const int R = int(info.dims[0]), C = int(info.dims[1]);
    const int B = info.dims.size() == 3 ? int(info.dims[2]) : 1;
    // Mat_VarRead converts the stored data to the class type; check what it gave us anyway.
    if (v->rank != int(info.dims.size()) || std::size_t(v->dims[0]) != info.dims[0] || v->class_type != info.cls)
        throw_invalid(kRead, path, "matio returned a different array than it listed for " + what);

    DType dtype{};
    switch (info.cls) {
        case MAT_C_DOUBLE: dtype = DType::F64; break;
        case MAT_C_SINGLE: dtype = DType::F32; break;
        case MAT_C_INT8: dtype = DType::I16; break;  // no i8 in cubekit; i16 holds every value
        case MAT_C_UINT8: dtype = DType::U8; break;  // logical is uint8 too
        case MAT_C_INT16: dtype = DType::I16; break;
        case MAT_C_UINT16: dtype = DType::U16; break;
        case MAT_C_INT32: dtype = DType::I32; break;
        case MAT_C_UINT32: dtype = DType::U32; break;
        default: throw_invalid(kRead, path, what + ": class not supported");
    }
    const std::size_t count = std::size_t(R) * std::size_t(C) * std::size_t(B);
    const std::size_t src_size = info.cls == MAT_C_INT8 ? 1 : dtype_size(dtype);
    if (v->nbytes < count * src_size)
        throw_invalid(kRead, path, what + ": matio returned " + std::to_string(v->nbytes) + " bytes, expected " + std::to_string(count * src_size));

    Cube cube(C, R, B, dtype, Layout::BSQ);
    switch (info.cls) {
        case MAT_C_DOUBLE: copy_transposed<double, double>(v->data, cube); break;
        case MAT_C_SINGLE: copy_transposed<float, float>(v->data, cube); break;
        case MAT_C_INT8: copy_transposed<std::int8_t, std::int16_t>(v->data, cube); break;
        case MAT_C_UINT8: copy_transposed<std::uint8_t, std::uint8_t>(v->data, cube); break;
        case MAT_C_INT16: copy_transposed<std::int16_t, std::int16_t>(v->data, cube); break;
        case MAT_C_UINT16: copy_transposed<std::uint16_t, std::uint16_t>(v->data, cube); break;
        case MAT_C_INT32: copy_transposed<std::int32_t, std::int32_t>(v->data, cube); break;
        case MAT_C_UINT32: copy_transposed<std::uint32_t, std::uint32_t>(v->data, cube); break;
        default: break;
    }
    return cube;
}

std::vector<std::string> list_mat(const fs::path& path) {
    std::lock_guard lock(matio_mutex());
    MatPtr mat = open_mat("list_mat_variables", path);
    std::vector<std::string> out;
    for (const auto& v : scan(mat.get()))
        if (v.numeric()) out.push_back(shown_name(v.name) + ": " + v.shape() + " " + v.type());
    return out;
}

}  // namespace cubekit::io_detail
