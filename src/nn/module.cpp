// go::nn::Module's parameter files (go/nn/module.hpp), in go/nn/serialize.hpp's format.
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "go/nn/module.hpp"
#include "go/nn/serialize.hpp"

namespace go::nn {

void Module::save(const std::string& path) const { save(path, nlohmann::json()); }

void Module::save(const std::string& path, const nlohmann::json& meta) const {
  NamedTensors t;
  for (auto& [n, p] : named_parameters()) t.emplace_back(n, p.value());
  save_tensors(path, t, meta);
}

nlohmann::json Module::load(const std::string& path) {
  LoadedTensors file = load_tensors(path);
  load(file, path);
  return std::move(file.meta);
}

void Module::load(const LoadedTensors& file, const std::string& path) {
  NamedTensors t;
  for (auto& [n, p] : named_parameters()) t.emplace_back(n, p.value());
  copy_tensors_into(file, path, t);
}

}  // namespace go::nn
