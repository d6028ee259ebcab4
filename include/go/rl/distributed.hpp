#pragma once
// Collective communication for distributed PPO (include/go/rl/ppo.hpp): the few operations the
// trainer needs, behind an interface with a single-process default. The MPI implementation lives
// in go/rl/mpi.hpp and exists only in builds that found MPI (GO_HAVE_MPI); the rest of the
// library never includes <mpi.h>.
//
// Every rank must call the collectives in the same order with the same sizes. Reductions must
// give every rank the same bits (MPI_Allreduce with MPI_SUM does for Open MPI and MPICH, whose
// algorithms compute each element once or symmetrically); the trainer relies on it to keep the
// parameters of all ranks bit-identical.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "go/autograd/variable.hpp"
#include "go/core/error.hpp"
#include "go/core/tensor.hpp"

namespace go::rl {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every rank ends with the element-wise sum over ranks.
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  // Every rank ends with root's `bytes` bytes at `data`.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // A short description for logs ("1 process", "MPI, 4 ranks").
  virtual const char* kind() const = 0;

  void broadcast(float* data, std::size_t n, int root) { broadcast(static_cast<void*>(data), n * sizeof(float), root); }
  double allreduce_sum(double x) {
    allreduce_sum(&x, 1);
    return x;
  }
};

// One process: rank 0 of 1; every collective is the identity.
class LocalCommunicator final : public Communicator {
 public:
  using Communicator::allreduce_sum;
  using Communicator::broadcast;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(float*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  const char* kind() const override { return "1 process"; }
};

inline std::shared_ptr<Communicator> local_communicator() { return std::make_shared<LocalCommunicator>(); }

// Root's tensor (dtype, shape and data, or undefined) on every rank; other ranks' `t` is replaced.
inline void broadcast_tensor(Communicator& c, Tensor& t, int root) {
  if (c.size() == 1) return;
  std::int64_t head[2 + Shape::kMaxRank] = {-1};
  if (c.rank() == root && t.defined()) {
    head[0] = static_cast<std::int64_t>(t.dtype());
    head[1] = t.shape().rank();
    for (int i = 0; i < t.shape().rank(); ++i) head[2 + i] = t.shape()[i];
  }
  c.broadcast(head, sizeof head, root);
  if (head[0] < 0) {
    t = Tensor();
    return;
  }
  if (c.rank() != root) {
    Shape s(head + 2, head + 2 + head[1]);
    if (!(t.defined() && t.shape() == s && static_cast<std::int64_t>(t.dtype()) == head[0]))
      t = Tensor::empty(s, static_cast<DType>(head[0]));
  }
  if (t.nbytes()) c.broadcast(t.raw(), t.nbytes(), root);
}

// Sums the gradients of `params` over ranks in one collective. A parameter ends with a gradient
// when any rank computed one (the others count zeros), and without one otherwise, as in one
// process where the union of the ranks' samples was back-propagated.
inline void allreduce_gradients(Communicator& c, const std::vector<Variable>& params, std::vector<float>& buffer) {
  if (c.size() == 1) return;
  std::size_t n = params.size();
  for (const auto& p : params) n += static_cast<std::size_t>(p.numel());
  buffer.assign(n, 0.f);
  std::size_t off = params.size();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Variable& p = params[i];
    if (p.has_grad()) {
      buffer[i] = 1.f;
      std::memcpy(buffer.data() + off, p.grad().f32(), static_cast<std::size_t>(p.numel()) * sizeof(float));
    }
    off += static_cast<std::size_t>(p.numel());
  }
  c.allreduce_sum(buffer.data(), buffer.size());
  off = params.size();
  for (std::size_t i = 0; i < params.size(); ++i) {
    Variable p = params[i];
    if (buffer[i] > 0.f) std::memcpy(p.grad().f32(), buffer.data() + off, static_cast<std::size_t>(p.numel()) * sizeof(float));
    else p.zero_grad();
    off += static_cast<std::size_t>(p.numel());
  }
}

// Root's data of `tensors` (same shapes on every rank; they share storage with the caller's) on every rank.
inline void broadcast_values(Communicator& c, const std::vector<Tensor>& tensors, int root) {
  if (c.size() == 1) return;
  for (Tensor t : tensors)
    if (t.nbytes()) c.broadcast(t.raw(), t.nbytes(), root);
}

}  // namespace go::rl
