#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "go/core/file.hpp"
#include "go/nn/module.hpp"
#include "go/nn/serialize.hpp"
#include "go/optim/adam.hpp"
#include "harness.hpp"

namespace test_optim {
using namespace go;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("go_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

struct TwoLayer : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  explicit TwoLayer(Rng& rng, std::int64_t hidden = 8) {
    a = register_module("a", std::make_shared<nn::Linear>(3, hidden, rng));
    b = register_module("b", std::make_shared<nn::Linear>(hidden, 2, rng));
  }
  Variable forward(const Variable& x) const { return b->forward(tanh(a->forward(x))); }
};
}  // namespace

TEST_CASE("adam: matches a hand-computed first step and converges on a quadratic", "[optim]") {
  // After one step with bias correction, each coordinate moves by lr * g / (|g| + eps') = lr * sign(g).
  Variable p(Tensor::from_vector<float>({1.f, -2.f, 0.5f}), true);
  Adam opt({p}, {.lr = 0.1f});
  sum(square(p)).backward();  // g = 2p
  opt.step();
  REQUIRE(p.value().at(0) == Approx(0.9f).margin(1e-6));
  REQUIRE(p.value().at(1) == Approx(-1.9f).margin(1e-6));
  REQUIRE(p.value().at(2) == Approx(0.4f).margin(1e-6));

  // f(x) = sum (A x - b)^2 with a known minimizer.
  Rng rng(11);
  Tensor A = test::random_tensor(Shape{6, 4}, rng), xs = test::random_tensor(Shape{4, 1}, rng);
  Tensor b = tensor::matmul(A, xs);
  Variable x(Tensor::zeros(Shape{4, 1}), true);
  Adam adam({x}, {.lr = 0.05f});
  float loss = 0;
  for (int it = 0; it < 2000; ++it) {
    adam.zero_grad();
    Variable l = sum(square(matmul(Variable(A), x) - Variable(b)));
    loss = l.item();
    l.backward();
    adam.step();
  }
  CHECK(loss < 1e-6f);
  for (int i = 0; i < 4; ++i) CHECK(x.value().at(i) == Approx(xs.at(i)).margin(1e-3));
  REQUIRE(adam.step_count() == 2000);
}

TEST_CASE("clip_grad_norm scales to the global norm", "[optim]") {
  Variable a(Tensor::from_vector<float>({3.f}), true), b(Tensor::from_vector<float>({4.f}), true);
  a.add_grad(Tensor::from_vector<float>({3.f}));
  b.add_grad(Tensor::from_vector<float>({4.f}));
  REQUIRE(clip_grad_norm({a, b}, 1.f) == Approx(5.f));
  REQUIRE(a.grad().at(0) == Approx(0.6f).margin(1e-5));
  REQUIRE(b.grad().at(0) == Approx(0.8f).margin(1e-5));
  // Below the bound nothing changes.
  REQUIRE(clip_grad_norm({a, b}, 10.f) == Approx(1.f).margin(1e-5));
  REQUIRE(a.grad().at(0) == Approx(0.6f).margin(1e-5));
}

TEST_CASE("modules: a small network learns XOR-like data", "[optim]") {
  Rng rng(12);
  TwoLayer net(rng, 16);
  REQUIRE(net.named_parameters().size() == 4);
  REQUIRE(net.named_parameters()[2].first == "b.weight");
  Tensor x = Tensor::from_vector<float>({0, 0, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1}, Shape{4, 3});
  Tensor y = Tensor::from_vector<float>({0, 1, 1, 0, 1, 0, 0, 1}, Shape{4, 2});
  Adam opt(net.parameters(), {.lr = 0.05f});
  float first = 0, last = 0;
  for (int it = 0; it < 500; ++it) {
    opt.zero_grad();
    Variable loss = mean(square(net.forward(Variable(x)) - Variable(y)));
    if (it == 0) first = loss.item();
    last = loss.item();
    loss.backward();
    opt.step();
  }
  CHECK(last < 0.01f * first);
}

TEST_CASE("parameters: save/load round trip and clear errors", "[optim][io]") {
  Rng rng(13);
  TwoLayer net(rng);
  const std::string path = temp_path("params.bin");
  net.save(path, {{"step", 7}});
  Rng other(99);
  TwoLayer copy(other);
  REQUIRE(copy.named_parameters()[0].second.value().at(0, 0) != net.named_parameters()[0].second.value().at(0, 0));
  const auto meta = copy.load(path);
  REQUIRE(meta.at("step") == 7);
  for (std::size_t i = 0; i < 4; ++i)
    REQUIRE(copy.named_parameters()[i].second.value().to_vector() == net.named_parameters()[i].second.value().to_vector());

  // A different architecture: the message names the tensor and the shapes.
  TwoLayer wide(rng, 9);
  REQUIRE_THROWS_WITH(wide.load(path), Catch::Contains(path) && Catch::Contains("a.weight") && Catch::Contains("[3, 8]"));

  const std::string bytes = read_file(path);
  auto write = [](const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary) << b; };
  const std::string bad = temp_path("bad.bin");
  // Truncated at many points: always a go::Error, never a crash.
  for (std::size_t cut : {std::size_t(0), std::size_t(5), std::size_t(15), std::size_t(40), bytes.size() / 2, bytes.size() - 1}) {
    write(bad, bytes.substr(0, cut));
    INFO("cut at " << cut);
    REQUIRE_THROWS_AS(copy.load(bad), Error);
  }
  write(bad, bytes.substr(0, bytes.size() - 1));
  REQUIRE_THROWS_WITH(copy.load(bad), Catch::Contains("truncated"));
  // A flipped data byte fails the checksum.
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x40;
  write(bad, flipped);
  REQUIRE_THROWS_WITH(copy.load(bad), Catch::Contains("checksum"));
  write(bad, "not a checkpoint at all");
  REQUIRE_THROWS_WITH(copy.load(bad), Catch::Contains("not a go parameter file"));
  REQUIRE_THROWS_WITH(copy.load(temp_path("missing.bin")), Catch::Contains("cannot open"));
  std::remove(bad.c_str());
  std::remove(path.c_str());
  // No temporary files are left behind by the atomic write.
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    REQUIRE(e.path().filename().string().find("go_test_" + std::to_string(::getpid()) + "_params.bin.tmp") == std::string::npos);
}

TEST_CASE("parameters: tensors of every dtype and empty tensors round-trip", "[optim][io]") {
  const std::string path = temp_path("mixed.bin");
  NamedTensors t = {{"f", Tensor::from_vector<float>({1.5f, -2.f})},
                    {"i", Tensor::from_vector<std::int32_t>({7, -8, 9})},
                    {"l", Tensor::from_vector<std::int64_t>({1ll << 40})},
                    {"empty", Tensor::zeros(Shape{0, 3})}};
  save_tensors(path, t);
  LoadedTensors in = load_tensors(path);
  REQUIRE(in.tensors.size() == 4);
  REQUIRE(in.tensors[0].second.to_vector() == t[0].second.to_vector());
  REQUIRE(in.tensors[1].second.to_vector<std::int32_t>() == t[1].second.to_vector<std::int32_t>());
  REQUIRE(in.tensors[2].second.to_vector<std::int64_t>() == t[2].second.to_vector<std::int64_t>());
  REQUIRE(in.tensors[3].second.shape() == Shape{0, 3});
  std::remove(path.c_str());
}

}  // namespace test_optim
