#pragma once
// Two simulations of one plan that must agree bit for bit (a reused workspace against a fresh one,
// prefetching on and off): every field of the result, and each op's unit and times.
#include <catch2/catch.hpp>

#include "go/sim/sim.hpp"

namespace go::test {

inline void check_same_simulation(const go::SimResult& got, const go::SimWorkspace& wgot, const go::SimResult& want,
                                  const go::SimWorkspace& wwant, go::OpId num_ops) {
  REQUIRE(got.valid == want.valid);
  REQUIRE(got.status == want.status);
  CHECK(got.step_time == want.step_time);
  CHECK(got.peak_memory == want.peak_memory);
  CHECK(got.busy_time == want.busy_time);
  CHECK(got.transfers == want.transfers);
  CHECK(got.transfer_bytes == want.transfer_bytes);
  CHECK(got.kernel_launches == want.kernel_launches);
  CHECK(got.memory_traffic == want.memory_traffic);
  CHECK(got.units == want.units);
  CHECK(got.problem_op == want.problem_op);
  CHECK(got.problem_op2 == want.problem_op2);
  CHECK(got.problem_group == want.problem_group);
  CHECK(got.problem_group2 == want.problem_group2);
  int differ = 0;  // one check for all ops: a large graph would otherwise add 3 assertions per op
  for (go::OpId v = 0; v < num_ops; ++v)
    differ += wgot.unit_of(v) != wwant.unit_of(v) || wgot.start_time(v) != wwant.start_time(v) ||
              wgot.finish_time(v) != wwant.finish_time(v);
  CHECK(differ == 0);
}

}  // namespace go::test
