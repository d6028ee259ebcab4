#pragma once
// GraphSAGE (Hamilton et al., 2017) with the pooling aggregator, over both edge
// directions of a DAG, as GO's node encoder:
//
//   p        = relu(h W_pool + b_pool)                      (one message per node)
//   up[i]    = max over the predecessors j of i of p[j]     (0 for a node without predecessors)
//   down[i]  = max over the successors j of i of p[j]       (0 for a node without successors)
//   h'       = relu([h, up, down] W + b)                    (W [3d, d]; no concatenation is formed)
//
// The aggregations run on the CSR kernels (go/autograd/aggregate.hpp); the two
// CsrPairs are built once per graph (see go/policy/features.hpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "go/autograd/aggregate.hpp"
#include "go/nn/layers.hpp"

namespace go::nn {

class GraphSageLayer : public Module {
 public:
  GraphSageLayer(std::int64_t dim, Rng& rng, kernels::Reduce reduce = kernels::Reduce::max) : reduce_(reduce) {
    pool_ = register_module("pool", std::make_shared<Dense>(dim, dim, rng, Activation::relu));
    combine_ = register_module("combine", std::make_shared<Dense>(3 * dim, dim, rng, Activation::relu));
  }
  // h [n, d]; preds.fwd / succs.fwd list each node's predecessors / successors.
  Variable forward(const Variable& h, const CsrPair& preds, const CsrPair& succs) const {
    GO_CHECK(h.value().rank() == 2 && h.dim(0) == preds.n_dst() && h.dim(0) == succs.n_dst() &&
                 preds.n_src() == h.dim(0) && succs.n_src() == h.dim(0),
             "GraphSageLayer: h ", h.shape().to_string(), " does not match the graph (", preds.n_dst(),
             " nodes with predecessors, ", succs.n_dst(), " with successors)");
    Variable p = reduce_ == kernels::Reduce::max ? pool_->forward(h) : h;
    Variable up = aggregate(p, preds, reduce_);
    Variable down = aggregate(p, succs, reduce_);
    return combine_->forward(std::vector<Variable>{h, up, down});
  }

 private:
  std::shared_ptr<Dense> pool_, combine_;
  kernels::Reduce reduce_;
};

// k layers of GraphSageLayer at a constant width.
class GraphSage : public Module {
 public:
  GraphSage(std::int64_t dim, int layers, Rng& rng, kernels::Reduce reduce = kernels::Reduce::max) {
    GO_CHECK(layers >= 0, "GraphSage: layers ", layers, " must be >= 0");
    for (int l = 0; l < layers; ++l)
      layers_.push_back(
          register_module("layer" + std::to_string(l), std::make_shared<GraphSageLayer>(dim, rng, reduce)));
  }
  Variable forward(Variable h, const CsrPair& preds, const CsrPair& succs) const {
    for (const auto& l : layers_) h = l->forward(h, preds, succs);
    return h;
  }
  int num_layers() const { return static_cast<int>(layers_.size()); }

 private:
  std::vector<std::shared_ptr<GraphSageLayer>> layers_;
};

}  // namespace go::nn
