#pragma once
// go::Tensor <-> device memory (f32, i32, i64): explicit, synchronous copies of a contiguous host
// tensor into a DeviceTensor and back. Compiles without CUDA (the copies then throw, see
// go/cuda/device.hpp). Not an autograd integration: a DeviceTensor is plain storage.
#include <cstdint>
#include <utility>

#include "go/core/error.hpp"
#include "go/core/tensor.hpp"
#include "go/cuda/device.hpp"

namespace go::cuda {

struct DeviceTensor {
  DeviceBuffer buffer;
  Shape shape;
  DType dtype = DType::f32;

  std::int64_t numel() const { return shape.numel(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }

  template <class T>
  T* data() {
    GO_CHECK(dtype_of<T>() == dtype, "DeviceTensor::data<", dtype_name(dtype_of<T>()), ">() on a ", dtype_name(dtype),
             " device tensor");
    return buffer.as<T>();
  }
  template <class T>
  const T* data() const {
    GO_CHECK(dtype_of<T>() == dtype, "DeviceTensor::data<", dtype_name(dtype_of<T>()), ">() on a ", dtype_name(dtype),
             " device tensor");
    return buffer.as<T>();
  }
};

// Uninitialized device storage of the given shape and element type.
inline DeviceTensor device_empty(const Shape& shape, DType dtype = DType::f32) {
  GO_CHECK(shape.numel() >= 0, "device_empty: bad shape ", shape.to_string());
  DeviceTensor t;
  t.shape = shape;
  t.dtype = dtype;
  t.buffer = DeviceBuffer(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  return t;
}

inline DeviceTensor device_zeros(const Shape& shape, DType dtype = DType::f32) {
  DeviceTensor t = device_empty(shape, dtype);
  t.buffer.zero();
  return t;
}

// A copy of host tensor t (its bytes as laid out: t must be a host tensor; slices of rows are
// contiguous, so any go::Tensor qualifies).
inline DeviceTensor to_device(const Tensor& t) {
  GO_CHECK(t.defined(), "to_device: undefined tensor");
  GO_CHECK(t.device().is_cpu(), "to_device: tensor is on ", t.device().to_string(), ", expected a host tensor");
  DeviceTensor d = device_empty(t.shape(), t.dtype());
  if (d.nbytes()) d.buffer.upload(t.raw(), d.nbytes());
  return d;
}

// A new host tensor holding a copy of d.
inline Tensor to_host(const DeviceTensor& d) {
  Tensor t = Tensor::empty(d.shape, d.dtype);
  if (d.nbytes()) d.buffer.download(t.raw(), d.nbytes());
  return t;
}

// Copies into an existing host tensor of the same shape and type.
inline void copy_to_host(const DeviceTensor& d, Tensor& t) {
  GO_CHECK(t.defined() && t.shape() == d.shape && t.dtype() == d.dtype, "copy_to_host: device tensor ",
           d.shape.to_string(), " ", dtype_name(d.dtype), " into host tensor ",
           t.defined() ? t.shape().to_string() : std::string("(undefined)"), " ",
           t.defined() ? dtype_name(t.dtype()) : std::string_view("-"));
  if (d.nbytes()) d.buffer.download(t.raw(), d.nbytes());
}

}  // namespace go::cuda
