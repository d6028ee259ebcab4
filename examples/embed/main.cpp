// Embedding the go library: fit a two-layer network with the autodiff core and
// Adam, then save and reload its parameters.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <go/go.hpp>

int main() {
  go::Rng rng(1);
  struct Net : go::nn::Module {
    std::shared_ptr<go::nn::Linear> l1, l2;
    explicit Net(go::Rng& r) {
      l1 = register_module("l1", std::make_shared<go::nn::Linear>(2, 16, r));
      l2 = register_module("l2", std::make_shared<go::nn::Linear>(16, 1, r));
    }
    go::Variable forward(const go::Variable& x) const { return l2->forward(go::tanh(l1->forward(x))); }
  } net(rng);

  // y = sin(3 x0) * x1 on random points.
  const std::int64_t n = 256;
  go::Tensor x = go::Tensor::uniform(go::Shape{n, 2}, rng, -1.f, 1.f);
  go::Tensor y = go::Tensor::empty(go::Shape{n, 1});
  for (std::int64_t i = 0; i < n; ++i) y.f32()[i] = std::sin(3.f * x.at(i, 0)) * x.at(i, 1);

  go::Adam opt(net.parameters(), {.lr = 0.01f});
  float first = 0;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    go::Variable loss = go::mean(go::square(net.forward(go::Variable(x)) - go::Variable(y)));
    if (step == 0) first = loss.item();
    loss.backward();
    go::clip_grad_norm(opt.params(), 1.f);
    opt.step();
  }
  const float trained = go::mean(go::square(net.forward(go::Variable(x)) - go::Variable(y))).item();
  const auto path = (std::filesystem::temp_directory_path() / "go_embed_example.params").string();
  net.save(path);
  Net reloaded(rng);
  reloaded.load(path);
  std::filesystem::remove(path);
  const float again = go::mean(go::square(reloaded.forward(go::Variable(x)) - go::Variable(y))).item();
  std::printf("embed_example: go %s, %lld parameters, loss %.4f -> %.4f, reloaded parameters give %.4f\n",
              GO_VERSION_STRING, static_cast<long long>(net.num_parameters()), first, trained, again);
  // Success: training reduced the loss and the reloaded network is bit-identical.
  return trained < 0.5f * first && again == trained ? 0 : 1;
}
