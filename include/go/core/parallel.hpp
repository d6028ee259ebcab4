#pragma once
// Work shared out over a few threads, in a fixed item order, for the loops whose results are
// combined afterwards in that order (so they do not depend on the thread count): the simulations
// of PPO's samples, of the anchor's candidates and of the trials that fit a plan to memory.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "go/core/error.hpp"

namespace go {

// Runs fn(thread, j) for j in [begin, end) on `threads` threads (the calling one included), items
// handed out in order; the first error of any thread is rethrown as "<what>: <message>".
inline void parallel_items(std::size_t begin, std::size_t end, int threads, const char* what,
                           const std::function<void(int, std::size_t)>& fn) {
  std::atomic<std::size_t> next{begin};
  std::vector<std::string> errors(static_cast<std::size_t>(std::max(1, threads)));
  auto work = [&](int tid) {
    try {
      for (;;) {
        const std::size_t j = next.fetch_add(1);
        if (j >= end) break;
        fn(tid, j);
      }
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(tid)] = e.what();
    }
  };
  std::vector<std::thread> pool;
  for (int tid = 1; tid < threads; ++tid) pool.emplace_back(work, tid);
  work(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors) GO_CHECK(e.empty(), what, ": ", e);
}

// Threads for such a loop: `threads` when positive, else the hardware's, at most one per item.
inline int item_threads(int threads, std::size_t items) {
  const std::size_t want = threads > 0 ? static_cast<std::size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::max<std::size_t>(1, std::min(want, items)));
}

}  // namespace go
