#pragma once
// The MPI implementation of go::rl::Communicator (go/rl/distributed.hpp), for builds that found
// MPI: link the CMake target go::mpi (go + MPI, defines GO_HAVE_MPI). Without GO_HAVE_MPI this
// header declares nothing, so the header-only library never needs <mpi.h>.
//
//   go::rl::MpiSession mpi(argc, argv);              // MPI_Init_thread when launched by mpirun
//   auto comm = mpi.communicator();                  // MPI_COMM_WORLD, or one process without mpirun
//   trainer.set_communicator(comm);                  // identical parameters from rank 0
//
// Threads: the simulation threads never call MPI, so MPI_THREAD_FUNNELED is enough.
#if defined(GO_HAVE_MPI)

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <memory>

#include "go/core/error.hpp"
#include "go/rl/distributed.hpp"

namespace go::rl {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps `comm` (not owned: the caller frees communicators it created).
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {
    int init = 0;
    MPI_Initialized(&init);
    GO_CHECK(init, "MpiCommunicator: MPI is not initialized");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  using Communicator::allreduce_sum;
  using Communicator::broadcast;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(float* data, std::size_t n) override { chunked(data, n, MPI_FLOAT); }
  void allreduce_sum(double* data, std::size_t n) override { chunked(data, n, MPI_DOUBLE); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (std::size_t off = 0; off < bytes; off += kChunk) {
      const int m = static_cast<int>(bytes - off < kChunk ? bytes - off : kChunk);
      check(MPI_Bcast(p + off, m, MPI_BYTE, root, comm_), "MPI_Bcast");
    }
  }
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
  const char* kind() const override { return "MPI"; }
  MPI_Comm comm() const { return comm_; }

 private:
  static constexpr std::size_t kChunk = std::size_t{1} << 30;  // elements or bytes per call (< INT_MAX)

  template <class T>
  void chunked(T* data, std::size_t n, MPI_Datatype type) {
    for (std::size_t off = 0; off < n; off += kChunk) {
      const int m = static_cast<int>(n - off < kChunk ? n - off : kChunk);
      check(MPI_Allreduce(MPI_IN_PLACE, data + off, m, type, MPI_SUM, comm_), "MPI_Allreduce");
    }
  }
  static void check(int rc, const char* what) { GO_CHECK(rc == MPI_SUCCESS, what, " failed (error ", rc, ")"); }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

// True when the process was started by an MPI launcher (mpirun/mpiexec of Open MPI, MPICH,
// Intel MPI, MVAPICH, or srun with PMI): only then is MPI initialized, so a plain run of a
// program built with MPI neither needs nor starts an MPI runtime.
inline bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// Initializes MPI (MPI_THREAD_FUNNELED) for its lifetime when launched by an MPI launcher (or
// when `force`); finalizes it at the end if it initialized it.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv, bool force = false) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init && (force || launched_by_mpi())) {
      int provided = 0;
      GO_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS, "MPI_Init_thread failed");
      owner_ = true;
      init = 1;
    }
    if (init) comm_ = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
    else comm_ = local_communicator();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() {
    if (!owner_) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
  }
  bool active() const { return comm_->size() > 1 || dynamic_cast<MpiCommunicator*>(comm_.get()) != nullptr; }
  std::shared_ptr<Communicator> communicator() const { return comm_; }
  // Ends every rank of the job (after an error on one rank, which would leave the others waiting
  // in a collective); returns normally without MPI.
  void abort(int code) const {
    if (active()) MPI_Abort(MPI_COMM_WORLD, code);
  }

 private:
  bool owner_ = false;
  std::shared_ptr<Communicator> comm_;
};

}  // namespace go::rl

#endif  // GO_HAVE_MPI
