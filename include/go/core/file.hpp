#pragma once
// Whole-file reads and atomic writes (a temporary file in the same folder, then
// rename): a process killed while writing never leaves a half-written file.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "go/core/error.hpp"

namespace go {

inline std::string read_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  GO_CHECK(!ec && std::filesystem::exists(status), path, ": cannot open: no such file");
  GO_CHECK(std::filesystem::is_regular_file(status), path, ": cannot open: not a regular file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  GO_CHECK(f, path, ": cannot open: ", std::strerror(errno));
  std::string data;
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, got);
  const bool failed = std::ferror(f);
  std::fclose(f);
  GO_CHECK(!failed, path, ": read error");
  return data;
}

inline void write_file_atomic(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  GO_CHECK(f, path, ": cannot write: ", std::strerror(errno));
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size() && std::fflush(f) == 0 &&
                  ::fsync(::fileno(f)) == 0;
  const int err = errno;
  std::fclose(f);
  if (!ok) {
    std::remove(tmp.c_str());
    GO_FAIL(path, ": write failed: ", std::strerror(err));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    GO_FAIL(path, ": cannot move the finished file into place: ", ec.message());
  }
}

}  // namespace go
