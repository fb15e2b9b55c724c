// Byte sources for PackedFile: a file read with pread (no mmap: the runtime controls when bytes are fetched) and a
// memory buffer (tests, the fuzzer).
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source.h"

namespace edgeflow {

FileSource::FileSource(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw FormatError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int e = errno;
    ::close(fd_);
    throw FormatError(path + ": cannot stat (" + std::strerror(e) + ")");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileSource::~FileSource() { ::close(fd_); }

void FileSource::read(uint64_t off, void* dst, size_t n) const {
  if (off > size_ || n > size_ - off) throw FormatError(path_ + ": read past the end of the file");
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(off));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw FormatError(path_ + ": short read (" + (got < 0 ? std::strerror(errno) : "end of file") + ")");
    p += got;
    off += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

void MemorySource::read(uint64_t off, void* dst, size_t n) const {
  if (off > size_ || n > size_ - off) throw FormatError("read past the end of the buffer");
  if (n) std::memcpy(dst, data_ + off, n);
}

}  // namespace edgeflow
