#pragma once
#include <cstdint>
#include <string>

namespace go {

enum class DeviceType : std::uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
  std::string to_string() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace go
