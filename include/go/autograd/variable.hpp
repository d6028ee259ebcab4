#pragma once
// Reverse-mode automatic differentiation.
//
// A Variable is a shared handle to a node holding a value, its gradient and,
// for results of ops, the inputs and the function that maps the output's
// gradient to the inputs'. Ops record a node only when gradients are enabled
// and some input requires a gradient, so inference builds no graph.
// backward() orders the recorded nodes topologically from the root and runs
// each backward function once. Leaf gradients accumulate across calls until
// zero_grad(); gradients of intermediate nodes are released as soon as they
// have been propagated.
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "go/core/tensor.hpp"

namespace go {

namespace detail {
inline bool& grad_mode_flag() {
  thread_local bool enabled = true;
  return enabled;
}
inline bool& retaining_graph_flag() {
  thread_local bool retaining = false;
  return retaining;
}
}  // namespace detail

inline bool grad_enabled() { return detail::grad_mode_flag(); }

// True while a backward pass that keeps its graph (retain_graph) runs on this thread. A node's
// backward may write over what it saved for it (its last reader) only when this is false: a kept
// graph can be back-propagated again.
inline bool retaining_graph() { return detail::retaining_graph_flag(); }

// Disables graph recording in its scope (this thread only).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(detail::grad_mode_flag()) { detail::grad_mode_flag() = false; }
  ~NoGradGuard() { detail::grad_mode_flag() = prev_; }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Adds src into dst (same shape), allocating dst when it is undefined.
inline void accumulate_into(Tensor& dst, const Tensor& src) {
  if (!dst.defined()) {
    dst = src.clone();
    return;
  }
  GO_CHECK(dst.shape() == src.shape(), "gradient of shape ", src.shape().to_string(),
           " does not match the variable's shape ", dst.shape().to_string());
  float* d = dst.f32();
  const float* s = src.f32();
  const std::int64_t n = dst.numel();
#pragma omp parallel for simd if (n > (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
}

class Variable {
 public:
  // Receives the inputs and the gradient of the output; adds into the inputs'
  // gradients (only those with requires_grad()).
  using BackwardFn = std::function<void(std::vector<Variable>& inputs, const Tensor& grad_output)>;

  Variable() = default;
  explicit Variable(Tensor value, bool requires_grad = false) : node_(std::make_shared<Node>()) {
    node_->value = std::move(value);
    node_->requires_grad = requires_grad;
  }

  // Whether make() records an op on these inputs: gradients are enabled and one of them needs one.
  // (An op whose forward keeps something for its backward only asks this first.)
  template <class Inputs>
  static bool records(const Inputs& inputs) {
    bool needs = false;
    if (grad_enabled())
      for (const auto& in : inputs) needs = needs || in.requires_grad();
    return needs;
  }
  // The result of an op. The graph edge is recorded only when it is needed.
  static Variable make(Tensor value, std::vector<Variable> inputs, BackwardFn backward) {
    const bool needs = records(inputs);
    Variable out(std::move(value), needs);
    if (needs) {
      out.node_->inputs = std::move(inputs);
      out.node_->backward = std::move(backward);
    }
    return out;
  }

  bool defined() const { return static_cast<bool>(node_); }
  const Tensor& value() const { return node().value; }
  Tensor& value() { return node().value; }
  const Shape& shape() const { return value().shape(); }
  std::int64_t dim(int i) const { return value().dim(i); }
  std::int64_t numel() const { return value().numel(); }
  float item() const { return value().item(); }

  bool requires_grad() const { return node_ && node_->requires_grad; }
  void set_requires_grad(bool r) { node().requires_grad = r; }
  bool is_leaf() const { return !node().backward; }

  bool has_grad() const { return node_ && node_->grad.defined(); }
  // The accumulated gradient; zeros of the value's shape when none was computed.
  const Tensor& grad() const {
    if (!node().grad.defined()) node_->grad = Tensor::zeros(value().shape());
    return node_->grad;
  }
  Tensor& grad() { return const_cast<Tensor&>(std::as_const(*this).grad()); }
  void add_grad(const Tensor& g) {
    if (requires_grad()) accumulate_into(node().grad, g);
  }
  void zero_grad() { node().grad = Tensor(); }

  // For backward functions that write the gradient in place: the gradient
  // buffer, and whether it already holds a gradient to add to (accumulate) or is
  // freshly allocated and uninitialized (overwrite).
  Tensor& grad_slot(bool& accumulate) {
    Node& n = node();
    accumulate = n.grad.defined();
    if (!accumulate) n.grad = Tensor::empty(n.value.shape());
    return n.grad;
  }

  // A new leaf with the same value and no history.
  Variable detach() const { return Variable(value(), false); }

  // Backward from a scalar (seed 1) or with an explicit seed gradient.
  void backward(bool retain_graph = false) {
    GO_CHECK(value().numel() == 1, "backward() without a seed needs a scalar, got shape ",
             value().shape().to_string());
    backward(Tensor::ones(value().shape()), retain_graph);
  }
  void backward(const Tensor& seed, bool retain_graph = false);

  const std::string& name() const { return node().name; }
  Variable& set_name(std::string n) {
    node().name = std::move(n);
    return *this;
  }
  const void* id() const { return node_.get(); }

 private:
  struct Node {
    Tensor value;
    Tensor grad;
    bool requires_grad = false;
    std::vector<Variable> inputs;
    BackwardFn backward;
    std::string name;
  };
  Node& node() const {
    GO_CHECK(node_, "use of an undefined Variable");
    return *node_;
  }

  std::shared_ptr<Node> node_;
};

inline void Variable::backward(const Tensor& seed, bool retain_graph) {
  GO_CHECK(seed.shape() == value().shape(), "backward seed of shape ", seed.shape().to_string(),
           " does not match the output's shape ", value().shape().to_string());
  if (!requires_grad()) return;
  // Iterative post-order DFS: deep graphs (thousands of ops) must not overflow the stack.
  // `order` owns the nodes, so releasing a node's inputs below cannot free a node still to be visited.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<std::shared_ptr<Node>, std::size_t>> stack{{node_, 0}};
  seen.insert(node_.get());
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->inputs.size()) {
      const std::shared_ptr<Node>& child = n->inputs[next++].node_;
      if (child && child->requires_grad && !seen.count(child.get())) {
        seen.insert(child.get());
        stack.emplace_back(child, 0);
      }
    } else {
      order.push_back(std::move(n));
      stack.pop_back();
    }
  }
  accumulate_into(node_->grad, seed);
  NoGradGuard no_grad;
  struct Retaining {
    bool prev = detail::retaining_graph_flag();
    explicit Retaining(bool r) { detail::retaining_graph_flag() = r; }
    ~Retaining() { detail::retaining_graph_flag() = prev; }
  } retaining(retain_graph);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = it->get();
    if (!n->backward) continue;  // a leaf
    if (n->grad.defined()) n->backward(n->inputs, n->grad);
    // Intermediate gradients are not kept: they are large and nothing reads them.
    n->grad = Tensor();
    if (!retain_graph) {
      n->inputs.clear();
      n->backward = nullptr;
      // Every consumer of this node ran before it and released its inputs: unless the caller
      // holds it, the node and its value (an activation) are freed now, not at the end.
      it->reset();
    }
  }
}

// Backward from several outputs at once, each with its own seed gradient: one pass over the
// union of their histories, each node's backward run once with every root's contribution summed.
inline void backward_seeded(const std::vector<Variable>& roots, const std::vector<Tensor>& seeds) {
  GO_CHECK(roots.size() == seeds.size(), "backward_seeded: ", roots.size(), " roots but ", seeds.size(), " seeds");
  for (std::size_t i = 0; i < roots.size(); ++i)
    GO_CHECK(seeds[i].shape() == roots[i].value().shape(), "backward_seeded: seed ", i, " of shape ",
             seeds[i].shape().to_string(), " does not match its root's shape ", roots[i].value().shape().to_string());
  Variable join = Variable::make(Tensor::zeros(Shape{1}), roots, [seeds](std::vector<Variable>& in, const Tensor&) {
    for (std::size_t i = 0; i < in.size(); ++i) in[i].add_grad(seeds[i]);
  });
  join.backward();
}

}  // namespace go
