#pragma once
// Modules own named parameters and child modules; names are dotted paths
// ("encoder.layer0.weight"), stable across runs, so checkpoints match by name.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "go/autograd/autograd.hpp"

namespace go {
struct LoadedTensors;  // go/nn/serialize.hpp
}

namespace go::nn {

class Module {
 public:
  virtual ~Module() = default;

  // All parameters, depth-first in registration order, with their dotted names.
  std::vector<std::pair<std::string, Variable>> named_parameters() const {
    std::vector<std::pair<std::string, Variable>> out;
    collect("", out);
    return out;
  }
  std::vector<Variable> parameters() const {
    std::vector<Variable> out;
    for (auto& [n, p] : named_parameters()) out.push_back(p);
    return out;
  }
  std::int64_t num_parameters() const {
    std::int64_t n = 0;
    for (auto& [name, p] : named_parameters()) n += p.numel();
    return n;
  }
  void zero_grad() {
    for (auto& [n, p] : named_parameters()) p.zero_grad();
  }

  // Writes the parameters to a go parameter file (go/nn/serialize.hpp), with `meta` as its
  // metadata (src/nn/module.cpp).
  void save(const std::string& path) const;
  void save(const std::string& path, const nlohmann::json& meta) const;
  // Loads values in place; names and shapes must match this module exactly. Returns the metadata.
  nlohmann::json load(const std::string& path);
  // The same from a file already read by load_tensors (`path` names it in errors).
  void load(const LoadedTensors& file, const std::string& path);

 protected:
  Variable& register_parameter(const std::string& name, Tensor value) {
    params_.emplace_back(name, Variable(std::move(value), true));
    params_.back().second.set_name(name);
    return params_.back().second;
  }
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const {
    for (auto& [n, p] : params_) out.emplace_back(prefix + n, p);
    for (auto& [n, c] : children_) c->collect(prefix + n + ".", out);
  }

  std::vector<std::pair<std::string, Variable>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// y = x W + b with W [in, out]; Glorot-uniform weights, zero bias.
class Linear : public Module {
 public:
  Linear(std::int64_t in, std::int64_t out, Rng& rng, bool bias = true) {
    const float a = std::sqrt(6.f / static_cast<float>(in + out));
    weight_ = register_parameter("weight", Tensor::uniform(Shape{in, out}, rng, -a, a));
    if (bias) bias_ = register_parameter("bias", Tensor::zeros(Shape{1, out}));
  }
  Variable forward(const Variable& x) const {
    Variable y = matmul(x, weight_);
    return bias_.defined() ? y + bias_ : y;
  }
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

 private:
  Variable weight_, bias_;
};

}  // namespace go::nn
