#pragma once
// Dense tensors: contiguous row-major storage with shared ownership. A view
// (rows(), reshape()) shares the storage of its source; clone() copies.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "go/core/device.hpp"
#include "go/core/dtype.hpp"
#include "go/core/error.hpp"
#include "go/core/rng.hpp"
#include "go/core/shape.hpp"

namespace go {

namespace detail {

// Large host buffers are recycled instead of returned to the system: a training
// step allocates the same activation sizes every time, and fresh pages from the
// kernel cost a page fault each (about as much as the kernels that fill them).
// Blocks of at least kMinCached bytes are kept, up to kMaxCachedBytes in all.
class HostBlockCache {
 public:
  static constexpr std::size_t kMinCached = std::size_t(1) << 18;
  static constexpr std::size_t kMaxCachedBytes = std::size_t(2) << 30;

  static HostBlockCache& instance() {
    static HostBlockCache* cache = new HostBlockCache();  // never destroyed: tensors may outlive static teardown
    return *cache;
  }

  void* take(std::size_t bytes) {
    if (bytes >= kMinCached) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= bytes;
        return p;
      }
    }
    void* p = fresh(bytes);
    if (!p) {
      release();  // give the cache back and try once more
      p = fresh(bytes);
    }
    if (!p) GO_FAIL("out of host memory allocating ", bytes, " bytes");
    return p;
  }

  void give(void* p, std::size_t bytes) {
    if (bytes >= kMinCached) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + bytes <= kMaxCachedBytes) {
        free_.emplace(bytes, p);
        cached_ += bytes;
        return;
      }
    }
    std::free(p);
  }

  // Returns every cached block to the system.
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [n, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

  std::size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

  static constexpr std::size_t kHugePage = std::size_t(2) << 20;
  static constexpr std::size_t kMinHuge = std::size_t(4) << 20;

 private:
  // Blocks of kMinHuge bytes or more are aligned to 2 MiB and asked for transparent huge pages
  // (where the kernel gives them on request only): a pass over an 80,000-op graph touches hundreds
  // of MB of fresh activations, and on a virtual machine their 4 KiB page faults cost about a third
  // of the pass (bench/README.md, "Huge pages for large tensors").
  static void* fresh(std::size_t bytes) {
    if (bytes < kMinHuge) return std::aligned_alloc(64, bytes);
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a kernel without them ignores it
#endif
    return p;
  }

  std::mutex mutex_;
  std::unordered_multimap<std::size_t, void*> free_;
  std::size_t cached_ = 0;
};

// 64-byte aligned host buffer: whole cache lines and aligned vector loads.
inline std::shared_ptr<void> allocate_host(std::size_t bytes) {
  if (bytes == 0) return std::shared_ptr<void>(nullptr, [](void*) {});
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = HostBlockCache::instance().take(rounded);
  return std::shared_ptr<void>(p, [rounded](void* q) { HostBlockCache::instance().give(q, rounded); });
}
}  // namespace detail

// Returns the host memory cached for reuse to the system (see detail::HostBlockCache).
inline void release_cached_host_memory() { detail::HostBlockCache::instance().release(); }

class Tensor {
 public:
  Tensor() = default;

  // Uninitialized storage.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu()) {
    GO_CHECK(device.is_cpu(), "tensor on ", device.to_string(), ": this build allocates host tensors only");
    Tensor t;
    t.shape_ = shape;
    t.dtype_ = dtype;
    t.device_ = device;
    t.defined_ = true;
    t.storage_ = detail::allocate_host(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
    return t;
  }
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32) {
    Tensor t = empty(shape, dtype);
    if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    return t;
  }
  static Tensor full(const Shape& shape, float value) {
    Tensor t = empty(shape);
    t.fill(value);
    return t;
  }
  static Tensor ones(const Shape& shape) { return full(shape, 1.f); }
  static Tensor scalar(float value) { return full(Shape{}, value); }

  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
    GO_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "from_vector: ", values.size(),
             " values do not fill shape ", shape.to_string(), " (", shape.numel(), " elements)");
    Tensor t = empty(shape, dtype_of<T>());
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
    return t;
  }
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<std::int64_t>(values.size())});
  }

  static Tensor randn(const Shape& shape, Rng& rng, float stddev = 1.f) {
    Tensor t = empty(shape);
    float* p = t.data<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = stddev * rng.normal();
    return t;
  }
  static Tensor uniform(const Shape& shape, Rng& rng, float lo = 0.f, float hi = 1.f) {
    Tensor t = empty(shape);
    float* p = t.data<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
    return t;
  }

  bool defined() const { return defined_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  std::int64_t dim(int i) const { return shape_[i]; }
  std::int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

  // Rows and columns of a matrix view: rank 2 as is, rank 1 as one row, rank 0 as 1x1.
  std::int64_t rows() const { return rank() >= 2 ? numel() / shape_[-1] : 1; }
  std::int64_t cols() const { return rank() >= 1 ? shape_[-1] : 1; }

  template <class T>
  T* data() {
    check_dtype<T>();
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* data() const {
    check_dtype<T>();
    return static_cast<const T*>(raw());
  }
  float* f32() { return data<float>(); }
  const float* f32() const { return data<float>(); }

  void* raw() { return storage_ ? static_cast<char*>(storage_.get()) + offset_ : nullptr; }
  const void* raw() const { return storage_ ? static_cast<const char*>(storage_.get()) + offset_ : nullptr; }

  // Rows [begin, end) of the leading dimension, sharing storage.
  Tensor slice_rows(std::int64_t begin, std::int64_t end) const {
    GO_CHECK(rank() >= 1, "slice_rows on a scalar tensor");
    GO_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice_rows [", begin, ", ", end,
             ") out of range for shape ", shape_.to_string());
    Tensor t = *this;
    Shape s;
    s.push_back(end - begin);
    for (int i = 1; i < rank(); ++i) s.push_back(shape_[i]);
    t.shape_ = s;
    const std::int64_t row_elems = shape_[0] ? numel() / shape_[0] : 0;
    t.offset_ = offset_ + static_cast<std::size_t>(begin * row_elems) * dtype_size(dtype_);
    return t;
  }

  Tensor reshape(const Shape& shape) const {
    GO_CHECK(shape.numel() == numel(), "cannot reshape ", shape_.to_string(), " (", numel(), " elements) to ",
             shape.to_string(), " (", shape.numel(), " elements)");
    Tensor t = *this;
    t.shape_ = shape;
    return t;
  }

  Tensor clone() const {
    Tensor t = empty(shape_, dtype_, device_);
    if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
    return t;
  }

  void copy_from(const Tensor& src) {
    GO_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "copy_from: source ", src.shape_.to_string(), " ",
             dtype_name(src.dtype_), " does not match destination ", shape_.to_string(), " ", dtype_name(dtype_));
    if (nbytes()) std::memmove(raw(), src.raw(), nbytes());
  }

  Tensor& fill(float value) {
    float* p = data<float>();
    std::fill(p, p + numel(), value);
    return *this;
  }
  Tensor& zero_() {
    if (nbytes()) std::memset(raw(), 0, nbytes());
    return *this;
  }

  float item() const {
    GO_CHECK(numel() == 1, "item() on a tensor of shape ", shape_.to_string());
    return *data<float>();
  }
  float at(std::int64_t i) const {
    GO_CHECK(0 <= i && i < numel(), "index ", i, " out of range for shape ", shape_.to_string());
    return data<float>()[i];
  }
  float at(std::int64_t r, std::int64_t c) const {
    GO_CHECK(0 <= r && r < rows() && 0 <= c && c < cols(), "index (", r, ", ", c, ") out of range for shape ",
             shape_.to_string());
    return data<float>()[r * cols() + c];
  }
  float& at(std::int64_t r, std::int64_t c) {
    GO_CHECK(0 <= r && r < rows() && 0 <= c && c < cols(), "index (", r, ", ", c, ") out of range for shape ",
             shape_.to_string());
    return data<float>()[r * cols() + c];
  }

  template <class T = float>
  std::vector<T> to_vector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + numel());
  }

  // Whether two tensors share storage (views of one another).
  bool shares_storage(const Tensor& o) const { return storage_ && storage_ == o.storage_; }

  std::string describe() const {
    return shape_.to_string() + " " + std::string(dtype_name(dtype_)) + " on " + device_.to_string();
  }

 private:
  template <class T>
  void check_dtype() const {
    GO_CHECK(dtype_ == dtype_of<T>(), "tensor of dtype ", dtype_name(dtype_), " accessed as ",
             dtype_name(dtype_of<T>()));
    GO_CHECK(device_.is_cpu(), "host access to a tensor on ", device_.to_string());
  }

  std::shared_ptr<void> storage_;
  std::size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu();
  bool defined_ = false;
};

}  // namespace go
