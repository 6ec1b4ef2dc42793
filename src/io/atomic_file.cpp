// Low-level file access for the I/O module: the atomic output file used by every writer (and by
// write_text_file, the one public atomic text writer), the input file used by every hand-written
// reader, and the two error constructors.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>

#include "io/io_internal.hpp"

namespace cubekit::io_detail {

void throw_os_error(std::string_view fn, const fs::path& path, std::string_view action, int err) {
    std::string msg;
    msg.append(fn).append(": ").append(path.string()).append(": ").append(action).append(": ");
    msg.append(std::strerror(err));
    throw IoError(msg);
}

void throw_invalid(std::string_view fn, const fs::path& path, std::string_view what) {
    std::string msg;
    msg.append(fn).append(": ").append(path.string()).append(": ").append(what);
    throw InvalidInput(msg);
}

// ---- InputFile ----------------------------------------------------------------------------------

InputFile::InputFile(std::string_view fn, fs::path path) : fn_(fn), path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_os_error(fn_, path_, "cannot open", errno);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        ::close(fd_);
        throw_os_error(fn_, path_, "cannot stat", err);
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd_);
        throw_os_error(fn_, path_, "cannot read", EISDIR);
    }
    size_ = std::uint64_t(st.st_size);
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

std::size_t InputFile::read_some_at(std::uint64_t offset, void* dst, std::size_t n) const {
    auto* p = static_cast<char*>(dst);
    std::size_t done = 0;
    while (done < n) {
        // pread takes at most SSIZE_MAX; Linux caps one call at ~2 GiB anyway.
        const std::size_t chunk = std::min<std::size_t>(n - done, std::size_t(1) << 30);
        const ssize_t r = ::pread(fd_, p + done, chunk, off_t(offset + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_os_error(fn_, path_, "cannot read", errno);
        }
        if (r == 0) break;  // end of file
        done += std::size_t(r);
    }
    return done;
}

void InputFile::read_at(std::uint64_t offset, void* dst, std::size_t n) const {
    const std::size_t got = read_some_at(offset, dst, n);
    if (got != n) {
        throw_invalid(fn_, path_,
                      "truncated: expected " + std::to_string(offset + n) + " bytes, the file has " +
                          std::to_string(offset + got));
    }
}

std::string InputFile::read_all() const {
    std::string s(std::size_t(size_), '\0');
    const std::size_t got = read_some_at(0, s.data(), s.size());
    s.resize(got);  // a file that shrank meanwhile: the reader will report what is missing
    return s;
}

// ---- AtomicFile ---------------------------------------------------------------------------------

namespace {

// Random suffix for temporary names. We do not use mkstemp: it creates the file with mode 0600,
// and the output must get the usual 0666 & ~umask like any other created file. open() with
// O_CREAT | O_EXCL and mode 0666 gives that, and the same no-clobber guarantee.
std::string random_suffix() {
    static constexpr char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}() ^ (std::uint64_t(::getpid()) << 32)};
    std::string s(6, 'x');
    for (char& c : s) c = chars[rng() % (sizeof(chars) - 1)];
    return s;
}

// The temporaries of the writes in progress, for abandon_unfinished_writes. A commit renames under
// the same lock, so a temporary is either removed or in place, never renamed after its removal.
struct LiveTemporaries {
    std::mutex mutex;
    std::set<std::string> paths;
    bool abandoned = false;
};
LiveTemporaries& live() {
    static LiveTemporaries* t = new LiveTemporaries;  // never destroyed: used until _exit
    return *t;
}

}  // namespace

AtomicFile::AtomicFile(std::string_view fn, fs::path target) : fn_(fn), target_(std::move(target)) {
    if (target_.filename().empty()) throw_invalid(fn_, target_, "the output path names a folder, not a file");
    const fs::path dir = target_.parent_path();
    const std::string base = "." + target_.filename().string() + ".tmp-";
    for (int attempt = 0; attempt < 100; ++attempt) {
        fs::path candidate = dir / (base + random_suffix());
        // Read-write: map() needs a descriptor it can read through (mmap requires it even for writing).
        fd_ = ::open(candidate.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ >= 0) {
            temp_ = std::move(candidate);
            const std::lock_guard lock(live().mutex);
            live().paths.insert(temp_.string());
            break;
        }
        if (errno != EEXIST) throw_os_error(fn_, target_, "cannot create", errno);
    }
    if (fd_ < 0) throw_os_error(fn_, target_, "cannot create a temporary file", EEXIST);
    buf_.resize(std::size_t(1) << 20);
}

AtomicFile::~AtomicFile() {
    if (map_) ::munmap(map_, map_size_);
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !temp_.empty()) {
        ::unlink(temp_.c_str());
        const std::lock_guard lock(live().mutex);
        live().paths.erase(temp_.string());
    }
}

void AtomicFile::write_all(const char* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
        const ssize_t r = ::write(fd_, p + done, n - done);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_os_error(fn_, target_, "cannot write", errno);
        }
        done += std::size_t(r);
    }
}

void AtomicFile::flush() {
    write_all(buf_.data(), used_);
    used_ = 0;
}

void AtomicFile::write(const void* data, std::size_t n) {
    if (fd_ < 0) throw_invalid(fn_, target_, "internal error: write after close");
    const char* p = static_cast<const char*>(data);
    if (n >= buf_.size()) {  // a large block (a cube's samples) goes to the file as it is, not through the buffer
        flush();
        write_all(p, n);
        return;
    }
    while (n > 0) {
        if (used_ == buf_.size()) flush();
        const std::size_t k = std::min(n, buf_.size() - used_);
        std::memcpy(buf_.data() + used_, p, k);
        used_ += k;
        p += k;
        n -= k;
    }
}

void AtomicFile::write_cube_le(const Cube& cube) {
    const std::size_t esize = dtype_size(cube.dtype());
    if (host_is_little_endian() || esize == 1) {
        write(cube.bytes(), cube.num_bytes());
        return;
    }
    // Big-endian host: swap a chunk at a time rather than copying the whole cube.
    std::vector<std::byte> tmp;
    const std::size_t chunk = (std::size_t(1) << 20) / esize * esize;
    for (std::size_t off = 0; off < cube.num_bytes(); off += chunk) {
        const std::size_t n = std::min(chunk, cube.num_bytes() - off);
        tmp.assign(cube.bytes() + off, cube.bytes() + off + n);
        byteswap_inplace(tmp.data(), n / esize, esize);
        write(tmp.data(), n);
    }
}

std::byte* AtomicFile::map(std::uint64_t size) {
    if (fd_ < 0 || map_) throw_invalid(fn_, target_, "internal error: map after close or twice");
    flush();
    // Reserve the blocks first: a full disk is then an error here, not a SIGBUS when a page is
    // first written through the mapping. glibc writes zeros where the file system cannot reserve.
    if (const int err = ::posix_fallocate(fd_, 0, off_t(size)); err != 0) throw_os_error(fn_, target_, "cannot reserve the output's size", err);
    void* p = ::mmap(nullptr, std::size_t(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) throw_os_error(fn_, target_, "cannot map the output into memory", errno);
    map_ = static_cast<std::byte*>(p);
    map_size_ = std::size_t(size);
    return map_;
}

void AtomicFile::close() {
    // A mapping outlives the descriptor (and the rename): it is undone on destruction. The kernel
    // writes the mapped pages back like the pages of write(); no msync (no fsync either).
    if (fd_ < 0) return;
    flush();
    const int fd = fd_;
    fd_ = -1;
    // close() can report a deferred write error (NFS, quota); treat it like a failed write.
    if (::close(fd) != 0 && errno != EINTR) throw_os_error(fn_, target_, "cannot write", errno);
}

void AtomicFile::commit() {
    close();
    const std::lock_guard lock(live().mutex);
    if (live().abandoned) throw IoError(fn_ + ": " + target_.string() + ": not written: the process is stopping");
    if (::rename(temp_.c_str(), target_.c_str()) != 0) throw_os_error(fn_, target_, "cannot rename the temporary file onto it", errno);
    committed_ = true;
    live().paths.erase(temp_.string());
}

}  // namespace cubekit::io_detail

namespace cubekit {

void abandon_unfinished_writes() noexcept {
    auto& t = io_detail::live();
    const std::lock_guard lock(t.mutex);
    t.abandoned = true;
    for (const std::string& p : t.paths) ::unlink(p.c_str());
    t.paths.clear();
}

void write_text_file(const std::filesystem::path& path, std::string_view text) {
    io_detail::AtomicFile file("write_text_file", path);
    file.write(text);
    file.commit();
}

}  // namespace cubekit
