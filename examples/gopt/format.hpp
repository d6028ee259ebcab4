#pragma once
// Text helpers shared by the gopt commands.
#include <cstdio>
#include <string>

namespace gopt {

// One line, printable: names read from corrupt files may hold control characters.
inline std::string printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

// 1234567 -> "1.23 MB" (decimal units).
inline std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

}  // namespace gopt
