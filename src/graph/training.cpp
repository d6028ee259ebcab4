// make_training_graph (go/graph/training.hpp), compiled once into libgo.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/op_kind.hpp"
#include "go/graph/training.hpp"

namespace go {

namespace detail {
namespace {

enum class SavedActivations : std::uint8_t { none, inputs, outputs, both };

SavedActivations saved_activations(OpKind k) {
  switch (k) {
    case OpKind::relu:
    case OpKind::sigmoid:
    case OpKind::tanh:
    case OpKind::softmax:
    case OpKind::dropout: return SavedActivations::outputs;
    case OpKind::max_pool:
    case OpKind::rnn: return SavedActivations::both;
    case OpKind::add:
    case OpKind::sub:
    case OpKind::concat:
    case OpKind::split:
    case OpKind::slice:
    case OpKind::pad:
    case OpKind::transpose:
    case OpKind::reshape:
    case OpKind::avg_pool:
    case OpKind::global_pool:
    case OpKind::reduce:
    case OpKind::accumulate: return SavedActivations::none;
    default: return SavedActivations::inputs;
  }
}

bool is_integral(ElemType t) {
  switch (t) {
    case ElemType::i8:
    case ElemType::u8:
    case ElemType::i16:
    case ElemType::i32:
    case ElemType::i64:
    case ElemType::boolean: return true;
    default: return false;
  }
}

double grad_flop_factor(OpKind k, int operand_grads) {
  switch (k) {
    case OpKind::conv:
    case OpKind::matmul:
    case OpKind::rnn: return static_cast<double>(std::clamp(operand_grads, 1, 2));
    case OpKind::batch_norm:
    case OpKind::layer_norm:
    case OpKind::softmax: return 2.0;
    default: return 1.0;
  }
}

}  // namespace
}  // namespace detail

OpGraph make_training_graph(const OpGraph& fwd, const TrainingOptions& opts) {
  const auto n = static_cast<std::size_t>(fwd.num_ops());
  auto copy_all = [&](GraphInfo info) {
    GraphBuilder b(std::move(info));
    b.reserve(n);
    for (OpId i = 0; i < fwd.num_ops(); ++i) b.add_op(op_spec(fwd, i));
    return b;
  };
  for (const Op& o : fwd.ops())
    if (o.role != OpRole::forward) {
      GraphInfo info = fwd.info();
      info.training = true;
      return copy_all(std::move(info)).build();
    }

  // ---- which ops need gradients ----
  std::vector<char> req(n, 0);
  for (OpId v : fwd.topo_order()) {
    const Op& o = fwd.op(v);
    if ((o.kind == OpKind::input || o.kind == OpKind::constant) && o.param_bytes == 0) continue;
    bool r = o.param_bytes > 0;
    for (TensorId t : fwd.inputs(v)) r = r || req[static_cast<std::size_t>(fwd.tensor(t).producer)];
    bool integral = o.num_outputs > 0;
    for (TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t)
      integral = integral && detail::is_integral(fwd.tensor(t).dtype);
    req[static_cast<std::size_t>(v)] = r && !integral ? 1 : 0;
  }
  const Optimizer optimizer = opts.optimizer.value_or(fwd.info().format == "neusight" ? Optimizer::none : Optimizer::momentum);

  // ---- ids ----
  std::int64_t next_id = 0;
  std::int32_t next_group = 0;
  for (const Op& o : fwd.ops()) {
    next_id = std::max(next_id, o.source_id + 1);
    next_group = std::max(next_group, o.colocation + 1);
  }
  const std::int64_t loss_id = next_id++, seed_id = next_id++;
  std::vector<std::int64_t> grad_id(n, -1);
  for (std::size_t v = 0; v < n; ++v)
    if (req[v]) grad_id[v] = next_id++;
  auto sid = [&](OpId v) { return fwd.op(v).source_id; };

  // For each op needing a gradient: its distinct inputs that need gradients -> output index of its grad op.
  std::vector<std::vector<TensorId>> grad_inputs(n);
  for (std::size_t v = 0; v < n; ++v) {
    if (!req[v]) continue;
    for (TensorId t : fwd.inputs(static_cast<OpId>(v))) {
      const OpId u = fwd.tensor(t).producer;
      auto& gi = grad_inputs[v];
      if (req[static_cast<std::size_t>(u)] && std::find(gi.begin(), gi.end(), t) == gi.end()) gi.push_back(t);
    }
  }
  // Contributions to the gradient of each tensor: (grad op source id, output index).
  std::vector<std::vector<TensorRef>> contrib(static_cast<std::size_t>(fwd.num_tensors()));
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t k = 0; k < grad_inputs[v].size(); ++k)
      contrib[static_cast<std::size_t>(grad_inputs[v][k])].push_back(TensorRef{grad_id[v], static_cast<std::int32_t>(k)});

  GraphInfo info = fwd.info();
  info.training = true;
  GraphBuilder b = copy_all(std::move(info));

  // ---- loss and its gradient seed ----
  OpSpec loss;
  loss.id = loss_id;
  loss.name = "loss";
  loss.kind = OpKind::reduce;
  {
    TensorSpec scalar;
    scalar.shape = {};
    loss.outputs.push_back(scalar);
  }
  double loss_elems = 0;
  std::vector<char> is_sink(n, 0);
  for (std::size_t v = 0; v < n; ++v) {
    if (!req[v] || fwd.out_degree(static_cast<OpId>(v)) > 0) continue;
    is_sink[v] = 1;
    const Op& o = fwd.op(static_cast<OpId>(v));
    if (o.num_outputs > 0) {
      loss.inputs.push_back(TensorRef{sid(static_cast<OpId>(v)), 0});
      loss_elems += static_cast<double>(fwd.tensor(o.first_output).bytes) / 4.0;
    } else {
      loss.control_inputs.push_back(sid(static_cast<OpId>(v)));
    }
  }
  loss.flops = loss_elems;
  OpSpec seed;
  seed.id = seed_id;
  seed.name = "loss/grad";
  seed.kind = OpKind::elementwise;
  seed.role = OpRole::backward;
  seed.inputs.push_back(TensorRef{loss_id, 0});
  {
    TensorSpec scalar;
    scalar.shape = {};
    seed.outputs.push_back(scalar);
  }
  b.add_op(std::move(loss));
  b.add_op(std::move(seed));

  // ---- gradient ops (reverse topological order), accumulation and updates ----
  std::vector<OpSpec> updates;
  auto topo = fwd.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId v = *it;
    const auto vi = static_cast<std::size_t>(v);
    if (!req[vi]) continue;
    const Op& o = fwd.op(v);
    if (o.param_bytes > 0 && o.colocation < 0) b.spec(v).colocation = next_group++;
    const std::int32_t group = b.spec(v).colocation;
    OpSpec gs;
    gs.id = grad_id[vi];
    gs.name = fwd.name(v) + "/grad";
    gs.kind = o.kind;
    gs.role = OpRole::backward;
    gs.temp_bytes = o.temp_bytes;
    // gradients of the op's outputs
    if (is_sink[vi]) gs.inputs.push_back(TensorRef{seed_id, 0});
    for (TensorId t = o.first_output; t < o.first_output + o.num_outputs; ++t) {
      auto& c = contrib[static_cast<std::size_t>(t)];
      if (c.empty()) continue;
      if (c.size() == 1) {
        gs.inputs.push_back(c[0]);
        continue;
      }
      OpSpec acc;
      acc.id = next_id++;
      acc.name = fwd.name(v) + "/grad_sum" + (o.num_outputs > 1 ? std::to_string(t - o.first_output) : std::string());
      acc.kind = OpKind::accumulate;
      acc.role = OpRole::backward;
      acc.inputs = c;
      const TensorInfo& ti = fwd.tensor(t);
      acc.outputs.push_back(tensor_spec(fwd, t));
      acc.flops = static_cast<double>(ti.bytes) / static_cast<double>(elem_size(ti.dtype)) *
                  static_cast<double>(c.size() - 1);
      gs.inputs.push_back(TensorRef{acc.id, 0});
      b.add_op(std::move(acc));
    }
    // saved forward activations
    const auto saved = detail::saved_activations(o.kind);
    if (saved == detail::SavedActivations::inputs || saved == detail::SavedActivations::both) {
      std::vector<TensorId> seen;
      for (TensorId t : fwd.inputs(v)) {
        if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
        seen.push_back(t);
        const TensorInfo& ti = fwd.tensor(t);
        gs.inputs.push_back(TensorRef{sid(ti.producer), ti.output_index});
      }
    }
    if (saved == detail::SavedActivations::outputs || saved == detail::SavedActivations::both)
      for (std::int32_t k = 0; k < o.num_outputs; ++k) gs.inputs.push_back(TensorRef{sid(v), k});
    if (gs.inputs.empty()) gs.control_inputs.push_back(sid(v));  // cannot start before its forward op
    // outputs: input gradients, then parameter gradients
    for (TensorId t : grad_inputs[vi]) gs.outputs.push_back(tensor_spec(fwd, t));
    auto params = fwd.op_params(v);
    const int operand_grads = static_cast<int>(grad_inputs[vi].size()) + (params.empty() ? 0 : 1);
    const double factor = detail::grad_flop_factor(o.kind, operand_grads);
    gs.flops = o.flops * factor;
    if (o.has_backward_time()) gs.time = o.backward_time;
    else if (o.has_time()) gs.time = o.time * factor;
    for (const ParamInfo& p : params) {
      TensorSpec pg;
      pg.shape_known = false;
      pg.bytes = p.bytes;
      const auto k = static_cast<std::int32_t>(gs.outputs.size());
      gs.outputs.push_back(pg);
      if (optimizer == Optimizer::none) continue;
      OpSpec up;
      up.name = p.name + "/update";
      up.kind = OpKind::update;
      up.role = OpRole::update;
      up.colocation = group;
      up.inputs.push_back(TensorRef{gs.id, k});
      const double elems = static_cast<double>(p.bytes) / 4.0;
      switch (optimizer) {
        case Optimizer::none:
        case Optimizer::sgd: up.flops = 2 * elems; break;
        case Optimizer::momentum:
          up.flops = 4 * elems;
          up.params.push_back(ParamSpec{p.name + "/momentum", p.bytes});
          break;
        case Optimizer::adam:
          up.flops = 12 * elems;
          up.params.push_back(ParamSpec{p.name + "/adam_m", p.bytes});
          up.params.push_back(ParamSpec{p.name + "/adam_v", p.bytes});
          break;
      }
      updates.push_back(std::move(up));
    }
    b.add_op(std::move(gs));
  }
  for (auto& up : updates) {
    up.id = next_id++;
    b.add_op(std::move(up));
  }
  return b.build();
}

}  // namespace go
