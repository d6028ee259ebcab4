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

// A name with a NUL byte (possible from Python) would open the file named by its part before the NUL.
inline void check_file_name(const std::string& path) {
  const std::size_t nul = path.find('\0');
  GO_CHECK(nul == std::string::npos, path.substr(0, nul), "\\0...: a file name cannot hold a NUL byte");
}

inline std::string read_file(const std::string& path) {
  check_file_name(path);
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

namespace detail {
// Writes all of `data` to `f` (flushed, and on disk with `sync`) and closes it: 0, or the errno of
// the first step that failed.
inline int write_and_close(std::FILE* f, std::string_view data, bool sync) {
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size() && std::fflush(f) == 0 &&
                  (!sync || ::fsync(::fileno(f)) == 0);
  const int err = ok ? 0 : (errno != 0 ? errno : EIO);
  const bool closed = std::fclose(f) == 0;
  return err != 0 ? err : closed ? 0 : (errno != 0 ? errno : EIO);
}
}  // namespace detail

// A regular file (or a new one) is replaced atomically; a symlink is followed, and its target is
// replaced. Anything else that exists (a FIFO, /dev/stdout, a device) is written to in place, as
// a shell redirection would; a folder is an error.
inline void write_file_atomic(const std::string& given, std::string_view data) {
  check_file_name(given);
  std::error_code ec;
  const auto status = std::filesystem::status(given, ec);  // of what a symlink points to
  GO_CHECK(!std::filesystem::is_directory(status), given, ": cannot write: it is a folder");
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    // /dev/stdout (a link to a pipe or terminal), a FIFO, a device: through the given path
    std::FILE* f = std::fopen(given.c_str(), "wb");
    GO_CHECK(f, given, ": cannot write: ", std::strerror(errno));
    const int err = detail::write_and_close(f, data, /*sync=*/false);
    GO_CHECK(err == 0, given, ": write failed: ", std::strerror(err));
    return;
  }
  std::string path = given;
  if (std::filesystem::is_symlink(std::filesystem::symlink_status(given, ec))) {
    const auto target = std::filesystem::canonical(given, ec);
    GO_CHECK(!ec, given, ": cannot write: the symlink cannot be followed: ", ec.message());
    path = target.string();
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  GO_CHECK(f, given, ": cannot write: ", std::strerror(errno));
  const int err = detail::write_and_close(f, data, /*sync=*/true);
  if (err != 0) {
    std::remove(tmp.c_str());
    GO_FAIL(given, ": write failed: ", std::strerror(err));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    GO_FAIL(given, ": cannot move the finished file into place: ", ec.message());
  }
}

}  // namespace go
