// make_zoo_graph (go/graph/zoo.hpp), compiled once into libgo: it instantiates every generator.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "go/core/error.hpp"
#include "go/graph/graph.hpp"
#include "go/graph/zoo.hpp"
#include "go/graph/zoo/amoebanet.hpp"
#include "go/graph/zoo/common.hpp"
#include "go/graph/zoo/inception_v3.hpp"
#include "go/graph/zoo/recurrent.hpp"
#include "go/graph/zoo/transformer_xl.hpp"
#include "go/graph/zoo/wavenet.hpp"

namespace go {

OpGraph make_zoo_graph(std::string_view name, const ZooOptions& opts) {
  using namespace detail::zoo;
  const auto ni = parse_name(name);
  GO_CHECK(ni.has_value(), "zoo:", name, ": unknown zoo workload (known: ", known_names(), ")");
  GO_CHECK(opts.max_ops > 0, "zoo:", name, ": max_ops must be positive, got ", opts.max_ops);
  ZooOptions o = defaults(*ni);
  auto dst = fields(o);
  auto src = fields(opts);
  std::string applicable;
  for (std::size_t f = 0; f < kNumFields; ++f)
    if (dst[f]->has_value()) applicable += (applicable.empty() ? "" : ", ") + std::string(kFieldNames[f]);
  for (std::size_t f = 0; f < kNumFields; ++f) {
    if (!src[f]->has_value()) continue;
    GO_CHECK(dst[f]->has_value(), "zoo:", name, ": option '", kFieldNames[f], "' does not apply (", name, " takes ",
             applicable, ")");
    GO_CHECK(**src[f] > 0, "zoo:", name, ": option '", kFieldNames[f], "' must be positive, got ", **src[f]);
    // (before anything is built: a step count of 10^8 would make its vectors of steps first)
    GO_CHECK(**src[f] <= opts.max_ops, "zoo:", name, ": option '", kFieldNames[f], "' is ", **src[f],
             "; options, and the ops of a zoo graph, go up to ", opts.max_ops);
    *dst[f] = *src[f];
  }
  Sizes z;
  z.name = std::string(name);
  z.max_ops = opts.max_ops;
  z.number = ni->number;
  z.batch = o.batch.value_or(0);
  z.seq = o.seq.value_or(0);
  z.hidden = o.hidden.value_or(0);
  z.segments = o.segments.value_or(0);
  z.depth = o.depth.value_or(0);
  z.vocab = o.vocab.value_or(0);
  z.image = o.image.value_or(0);
  switch (ni->family) {
    case Family::rnnlm: return rnnlm(z);
    case Family::gnmt: return gnmt(z);
    case Family::transformer_xl: return transformer_xl(z);
    case Family::inception_v3: return inception_v3(z);
    case Family::amoebanet: return amoebanet(z);
    case Family::wavenet: return wavenet(z);
  }
  GO_FAIL("zoo:", name, ": unknown zoo workload");
}

OpGraph make_zoo_graph_from_spec(std::string_view spec) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  ZooOptions o;
  auto dst = detail::zoo::fields(o);
  std::string_view rest = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  while (colon != std::string_view::npos) {
    const std::size_t next = rest.find(':');
    const std::string_view item = rest.substr(0, next);
    const std::size_t eq = item.find('=');
    GO_CHECK(eq != std::string_view::npos && eq > 0, "zoo:", spec, ": option '", item,
             "' must be <option>=<positive integer>, e.g. zoo:gnmt2:seq=16");
    const std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    std::size_t f = 0;
    while (f < detail::zoo::kNumFields && detail::zoo::kFieldNames[f] != key) ++f;
    GO_CHECK(f < detail::zoo::kNumFields, "zoo:", spec, ": unknown option '", key,
             "' (options: batch, seq, hidden, segments, depth, vocab, image)");
    // the last of two values would win silently
    GO_CHECK(!dst[f]->has_value(), "zoo:", spec, ": option '", key, "' is given twice");
    bool digits = !val.empty();
    for (char ch : val) digits = digits && ch >= '0' && ch <= '9';
    GO_CHECK(digits, "zoo:", spec, ": option '", key, "' needs a positive integer, got '", val, "'");
    // (12 digits cannot overflow and are far past the limit, which make_zoo_graph checks)
    GO_CHECK(val.size() <= 12, "zoo:", spec, ": option '", key, "' is ", val,
             "; options, and the ops of a zoo graph, go up to ", o.max_ops);
    std::int64_t v = 0;
    for (char ch : val) v = v * 10 + (ch - '0');
    *dst[f] = v;
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  return make_zoo_graph(name, o);
}

}  // namespace go
