#pragma once
// Hand-made graphs and clusters for the placer tests: ops with measured times (ms) and one output
// of a given size each, and identical devices on identical links.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "go/graph/graph.hpp"
#include "go/sim/cluster.hpp"

namespace go_test {

struct Tiny {
  go::GraphBuilder b;
  go::OpId op(const std::string& name, double ms, std::int64_t out_bytes, std::vector<go::OpId> ins = {},
              std::int64_t params = 0, go::OpKind kind = go::OpKind::matmul, std::int32_t colocation = -1) {
    go::OpSpec s;
    s.name = name;
    s.kind = kind;
    s.colocation = colocation;
    s.time = ms * 1e-3;
    s.param_bytes = params;
    go::TensorSpec t;
    t.shape_known = false;
    t.bytes = out_bytes;
    s.outputs.push_back(t);
    for (go::OpId i : ins) s.inputs.push_back(go::TensorRef{i, 0});
    return b.add_op(std::move(s));
  }
  go::OpGraph build() { return b.build(); }
};

inline go::DeviceSpec test_device(std::int64_t memory = 1LL << 40) {
  go::DeviceSpec s;
  s.name = "test";
  s.peak_flops = 1e12;
  s.mem_bandwidth = 1e9;
  s.launch_overhead = 1e-5;
  s.memory_bytes = memory;
  return s;
}

// Devices with `memory` bytes each; links 1 GB/s, 100 us.
inline go::Cluster test_cluster(int n, std::int64_t memory = 1LL << 40) {
  return go::Cluster::uniform("test", test_device(memory), n, 1e9, 1e-4);
}

}  // namespace go_test
