// ByteSource implementations (internal).
#pragma once

#include <string>

#include "edgeflow/format.h"

namespace edgeflow {

class FileSource final : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  uint64_t size() const override { return size_; }
  void read(uint64_t off, void* dst, size_t n) const override;
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t size() const override { return size_; }
  void read(uint64_t off, void* dst, size_t n) const override;

 private:
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace edgeflow
