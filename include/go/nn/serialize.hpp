#pragma once
// Named tensors on disk: a binary file with a JSON header of names and shapes.
//
//   bytes 0..7   "GOPARAMS"
//   bytes 8..15  header length H (little-endian u64)
//   H bytes      JSON: {"format": "go-parameters", "version": 1,
//                       "tensors": [{"name", "dtype", "shape", "offset", "nbytes"}...],
//                       "data_bytes": D, "checksum": "<FNV-1a 64 of the data, hex>", "meta": {...}}
//   D bytes      the tensors' raw little-endian data, at their offsets (64-byte aligned)
//
// Loading checks the magic, the header, the size, the checksum and that the
// names and shapes match exactly what the caller expects, and says which
// tensor and which file when they do not.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "go/core/file.hpp"
#include "go/core/hash.hpp"
#include "go/core/tensor.hpp"

namespace go {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

namespace detail {
inline constexpr char kParamMagic[8] = {'G', 'O', 'P', 'A', 'R', 'A', 'M', 'S'};

using go::fnv1a64;
using go::hex64;
}  // namespace detail

// Writes the tensors (atomically) with optional metadata.
inline void save_tensors(const std::string& path, const NamedTensors& tensors, const nlohmann::json& meta = {}) {
  nlohmann::json header = {{"format", "go-parameters"}, {"version", 1}};
  nlohmann::json list = nlohmann::json::array();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    GO_CHECK(t.defined(), path, ": tensor '", name, "' is undefined");
    std::vector<std::int64_t> shape(t.shape().begin(), t.shape().end());
    list.push_back({{"name", name}, {"dtype", std::string(dtype_name(t.dtype()))}, {"shape", shape},
                    {"offset", offset}, {"nbytes", t.nbytes()}});
    offset += (t.nbytes() + 63) / 64 * 64;
  }
  std::string data(offset, '\0');
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    if (t.nbytes()) std::memcpy(data.data() + list[i]["offset"].get<std::uint64_t>(), t.raw(), t.nbytes());
  }
  header["tensors"] = std::move(list);
  header["data_bytes"] = offset;
  header["checksum"] = detail::hex64(detail::fnv1a64(data.data(), data.size()));
  header["meta"] = meta.is_null() ? nlohmann::json::object() : meta;
  const std::string h = header.dump();
  std::string out(detail::kParamMagic, 8);
  const std::uint64_t hl = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((hl >> (8 * i)) & 0xff));
  out += h;
  out += data;
  write_file_atomic(path, out);
}

struct LoadedTensors {
  NamedTensors tensors;
  nlohmann::json meta;
};

// Reads every tensor of a file written by save_tensors.
inline LoadedTensors load_tensors(const std::string& path) {
  const std::string bytes = read_file(path);
  GO_CHECK(bytes.size() >= 16 && std::memcmp(bytes.data(), detail::kParamMagic, 8) == 0, path,
           ": not a go parameter file (bad magic or too short: ", bytes.size(), " bytes)");
  std::uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  GO_CHECK(hl <= bytes.size() - 16, path, ": truncated (header of ", hl, " bytes, file has ", bytes.size(), ")");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + static_cast<std::ptrdiff_t>(hl));
  } catch (const nlohmann::json::exception& e) {
    GO_FAIL(path, ": corrupt header: ", e.what());
  }
  LoadedTensors out;
  try {
    GO_CHECK(header.at("format") == "go-parameters" && header.at("version") == 1, path,
             ": unsupported format or version ", header.value("version", -1));
    // Header numbers are checked before conversion: a float or negative value is an error, not UB.
    auto count = [&](const nlohmann::json& v, const char* what) {
      GO_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0), path, ": ", what,
               " must be a non-negative integer, got ", v.dump());
      return v.get<std::uint64_t>();
    };
    const std::uint64_t data_bytes = count(header.at("data_bytes"), "data_bytes");
    const std::uint64_t start = 16 + hl;
    GO_CHECK(bytes.size() - start == data_bytes, path, ": truncated or padded: expected ", data_bytes,
             " data bytes, found ", bytes.size() - start);
    const char* data = bytes.data() + start;
    GO_CHECK(detail::hex64(detail::fnv1a64(data, data_bytes)) == header.at("checksum").get<std::string>(), path,
             ": checksum mismatch: the data is corrupt");
    for (const auto& e : header.at("tensors")) {
      const std::string name = e.at("name").get<std::string>();
      const std::string dt = e.at("dtype").get<std::string>();
      const DType dtype = dt == "f32" ? DType::f32 : dt == "i32" ? DType::i32 : dt == "i64" ? DType::i64 : [&]() -> DType {
        GO_FAIL(path, ": tensor '", name, "' has unknown dtype '", dt, "'");
      }();
      Shape shape;
      GO_CHECK(e.at("shape").is_array() && e.at("shape").size() <= static_cast<std::size_t>(Shape::kMaxRank), path,
               ": tensor '", name, "' has a shape that is not a list of at most ", Shape::kMaxRank, " dimensions");
      std::uint64_t elems = 1;
      for (const auto& d : e.at("shape")) {
        const std::uint64_t dim = count(d, "a shape dimension");
        GO_CHECK(!__builtin_mul_overflow(elems, dim, &elems), path, ": tensor '", name, "' has an absurd shape");
        shape.push_back(static_cast<std::int64_t>(std::min<std::uint64_t>(dim, INT64_MAX)));
      }
      GO_CHECK(elems <= data_bytes, path, ": tensor '", name, "' has a shape larger than the file's data");
      const std::uint64_t off = count(e.at("offset"), "offset"), nb = count(e.at("nbytes"), "nbytes");
      GO_CHECK(nb == static_cast<std::uint64_t>(shape.numel()) * dtype_size(dtype) && off <= data_bytes &&
                   nb <= data_bytes - off,
               path, ": tensor '", name, "' has an inconsistent size or offset");
      Tensor t = Tensor::empty(shape, dtype);
      if (nb) std::memcpy(t.raw(), data + off, nb);
      out.tensors.emplace_back(name, std::move(t));
    }
    out.meta = header.value("meta", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    GO_FAIL(path, ": malformed header: ", e.what());
  }
  return out;
}

// Copies a file's tensors (read by load_tensors from `path`) into existing tensors: names and
// shapes must match one to one.
inline void copy_tensors_into(const LoadedTensors& in, const std::string& path, NamedTensors& dst) {
  GO_CHECK(in.tensors.size() == dst.size(), path, ": holds ", in.tensors.size(), " tensors, expected ", dst.size(),
           " (a checkpoint of a different model?)");
  for (std::size_t i = 0; i < dst.size(); ++i) {
    auto& [name, t] = dst[i];
    const auto& [fname, ft] = in.tensors[i];
    GO_CHECK(fname == name, path, ": tensor ", i, " is '", fname, "', expected '", name, "'");
    GO_CHECK(ft.shape() == t.shape() && ft.dtype() == t.dtype(), path, ": tensor '", name, "' is ", ft.describe(),
             ", expected ", t.describe());
    t.copy_from(ft);
  }
}

// Loads into existing tensors: names and shapes must match one to one.
inline nlohmann::json load_tensors_into(const std::string& path, NamedTensors& dst) {
  LoadedTensors in = load_tensors(path);
  copy_tensors_into(in, path, dst);
  return in.meta;
}

}  // namespace go
