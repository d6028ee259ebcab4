#pragma once
// The `exact` MILP (the model of go/baselines/exact.hpp's header comment) built for CBC: columns,
// rows, a MIP start from a simulated run, one solve. The channel rows cover only the transfer pairs
// in a Contention set, which the solve loop of exact.hpp grows from simulated runs.
#if defined(GO_WITH_CBC)
#include <Cbc_C_Interface.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "go/baselines/common.hpp"
#include "go/baselines/exact/problem.hpp"

namespace go::detail::exact {

// The transfer jobs (tensor, destination device) and the pairs of them with channel rows.
struct Contention {
  std::vector<std::pair<std::int32_t, std::int32_t>> jobs;  // (Problem::xfers index, destination)
  std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t> at;
  std::set<std::pair<std::int32_t, std::int32_t>> pairs;  // job indices, first < second

  std::int32_t job(std::int32_t x, std::int32_t d) {
    auto [it, fresh] = at.emplace(std::make_pair(x, d), static_cast<std::int32_t>(jobs.size()));
    if (fresh) jobs.emplace_back(x, d);
    return it->second;
  }
  bool add(std::int32_t a, std::int32_t b) {
    if (a == b) return false;
    return pairs.emplace(std::min(a, b), std::max(a, b)).second;
  }
  // Tensors x and y contend: the pairs of their jobs to every two destinations (of k devices). A
  // pair for the destinations where they met only would let the next solve move the readers to
  // other devices (identical ones, often) and meet again there, one round per relabelling.
  bool add_tensors(std::int32_t x, std::int32_t y, std::int32_t k) {
    bool added = false;
    for (std::int32_t a = 0; a < k; ++a)
      for (std::int32_t b = 0; b < k; ++b)
        if (x != y || a != b) added |= add(job(x, a), job(y, b));
    return added;
  }
};

struct MilpResult {
  bool have = false;   // a solution
  bool proven = false; // proven optimal
  bool infeasible = false;
  double objective = 0, bound = 0;  // seconds
  std::vector<std::int32_t> dev;    // per op
  std::vector<double> start;        // per op, seconds
};

class Milp {
 public:
  // H: an upper bound on the optimum (seconds; a simulated plan's step time): time is scaled so that
  // H is 1000 model units, and M = 1000 is every big-M.
  Milp(const Problem& pb, bool with_memory, bool sym, double H, const Contention& ct) : pb_(pb), ct_(ct) {
    build(with_memory, sym, H);
  }
  bool memory_modelled() const { return memory_modelled_; }

  // CBC's MIP start: the integer columns of a simulated run (feasible: the relaxation argument).
  std::pair<std::vector<int>, std::vector<double>> start_from(const Replay& r) const {
    std::vector<int> idx;
    std::vector<double> val;
    const auto& dev = r.plan.device;
    auto on = [&](OpId v) { return dev.empty() ? 0 : dev[static_cast<std::size_t>(v)]; };
    for (std::int32_t u = 0; u < pb_.num_units; ++u)
      for (std::int32_t d = 0; d < pb_.k; ++d) idx.push_back(xbase_[static_cast<std::size_t>(u)] + d), val.push_back(0);
    for (OpId v = 0; v < pb_.n; ++v) val[static_cast<std::size_t>(x(v, on(v)) - xbase_[0])] = 1;
    for (const OpPair& p : op_pairs_) {
      const auto u = static_cast<std::size_t>(p.u), v = static_cast<std::size_t>(p.v);
      idx.push_back(p.o);
      val.push_back(r.start[u] < r.start[v] || (r.start[u] == r.start[v] && r.finish[u] <= r.finish[v]) ? 1 : 0);
    }
    for (const JobPair& p : job_pairs_) {
      if (p.shared) continue;
      idx.push_back(p.o);
      if (p.fixed >= 0) val.push_back(p.fixed);
      else val.push_back(first_reader_on(p, dev) == jobs_[static_cast<std::size_t>(p.i)].d ? 1 : 0);
    }
    // tensors of two producers: the run's request order (its transfers are listed in it), else
    // the producers' completion order
    std::vector<std::int32_t> first(pb_.xfers.size(), -1);
    for (std::size_t i = 0; i < r.transfers.size(); ++i)
      if (first[static_cast<std::size_t>(r.transfers[i].x)] < 0) first[static_cast<std::size_t>(r.transfers[i].x)] = static_cast<std::int32_t>(i);
    for (const auto& [key, o] : tensor_order_) {
      const auto [xa, xb] = key;
      const std::int32_t ia = first[static_cast<std::size_t>(xa)], ib = first[static_cast<std::size_t>(xb)];
      const double fa = r.finish[static_cast<std::size_t>(pb_.xfers[static_cast<std::size_t>(xa)].u)];
      const double fb = r.finish[static_cast<std::size_t>(pb_.xfers[static_cast<std::size_t>(xb)].u)];
      idx.push_back(o);
      val.push_back(ia >= 0 && ib >= 0 ? (ia < ib ? 1 : 0) : (fa <= fb ? 1 : 0));
    }
    return {idx, val};
  }

  static constexpr double kPreprocessSeconds = 10.0;  // shorter solves skip CBC's preprocessing

  MilpResult solve(double seconds, const std::pair<std::vector<int>, std::vector<double>>* mip_start) const {
    using CbcPtr = std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)>;
    const int ncols = static_cast<int>(collb_.size()), nrows = static_cast<int>(rows_.size());
    std::vector<CoinBigIndex> start(static_cast<std::size_t>(ncols) + 1, 0);
    for (const Row& r : rows_)
      for (int j : r.idx) ++start[static_cast<std::size_t>(j) + 1];
    for (int j = 0; j < ncols; ++j) start[static_cast<std::size_t>(j) + 1] += start[static_cast<std::size_t>(j)];
    std::vector<int> index(static_cast<std::size_t>(start.back()));
    std::vector<double> value(index.size());
    std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
    std::vector<double> rowlb(static_cast<std::size_t>(nrows)), rowub(static_cast<std::size_t>(nrows));
    for (int i = 0; i < nrows; ++i) {
      const Row& r = rows_[static_cast<std::size_t>(i)];
      rowlb[static_cast<std::size_t>(i)] = r.lo == -kInf ? -std::numeric_limits<double>::max() : r.lo;
      rowub[static_cast<std::size_t>(i)] = r.hi == kInf ? std::numeric_limits<double>::max() : r.hi;
      for (std::size_t e = 0; e < r.idx.size(); ++e) {
        const auto at = static_cast<std::size_t>(fill[static_cast<std::size_t>(r.idx[e])]++);
        index[at] = i;
        value[at] = r.val[e];
      }
    }
    CbcPtr p(Cbc_newModel(), Cbc_deleteModel);
    Cbc_Model* m = p.get();
    Cbc_loadProblem(m, ncols, nrows, start.data(), index.data(), value.data(), collb_.data(), colub_.data(), obj_.data(),
                    rowlb.data(), rowub.data());
    for (int j = 0; j < ncols; ++j)
      if (integer_[static_cast<std::size_t>(j)]) Cbc_setInteger(m, j);
    Cbc_setObjSense(m, 1);
    const std::string sec = std::to_string(std::max(1.0, seconds));
    Cbc_setParameter(m, "log", "0");
    Cbc_setParameter(m, "timeMode", "elapsed");
    Cbc_setParameter(m, "sec", sec.c_str());
    Cbc_setParameter(m, "threads", "0");
    // CBC 2.10 crashes (CglPreProcess::postProcess) when its time limit ends inside preprocessing,
    // which took about 2 s of a ResNet-18 training graph's model on a slow 2-core machine; short
    // solves go without it.
    if (seconds < kPreprocessSeconds) Cbc_setParameter(m, "preprocess", "off");
    if (mip_start) Cbc_setMIPStartI(m, static_cast<int>(mip_start->first.size()), mip_start->first.data(), mip_start->second.data());
    Cbc_solve(m);
    MilpResult out;
    out.bound = Cbc_getBestPossibleObjValue(m) / scale_;
    const double* sol = Cbc_bestSolution(m);
    out.infeasible = Cbc_isProvenInfeasible(m) && !sol;
    if (!sol) return out;
    out.have = true;
    out.objective = sol[Ccol_] / scale_;
    out.proven = Cbc_isProvenOptimal(m) || out.objective <= out.bound * (1 + 1e-9);
    out.dev.resize(static_cast<std::size_t>(pb_.n));
    out.start.resize(static_cast<std::size_t>(pb_.n));
    for (OpId v = 0; v < pb_.n; ++v) {
      std::int32_t bd = 0;
      for (std::int32_t d = 1; d < pb_.k; ++d)
        if (sol[x(v, d)] > sol[x(v, bd)]) bd = d;
      out.dev[static_cast<std::size_t>(v)] = bd;
      out.start[static_cast<std::size_t>(v)] = sol[S_[static_cast<std::size_t>(v)]] / scale_;
    }
    return out;
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Row {
    std::vector<int> idx;
    std::vector<double> val;
    double lo, hi;
  };
  struct OpPair {
    OpId u, v;
    int o;
  };
  struct JobCols {
    OpId u = -1;
    std::int32_t d = 0;
    int R = -1, a = -1, D = -1;  // start, active, duration (-1: T a)
    double T = 0;                // uniform duration, model units
  };
  struct JobPair {
    std::int32_t i, j;  // job indices; o == 1: i first on a common channel
    int o;
    int fixed;          // same producer, other tensors: the simulator's order (tensor order), else -1
    bool same_tensor;   // one tensor to two devices: the order of their first readers
    bool shared = false;  // two producers: o is their tensors' tensor_order_ column
    bool flip = false;    // ... and i's tensor is the later one of that key: i first is 1 - o
  };

  const Problem& pb_;
  const Contention& ct_;
  double scale_ = 1, M_ = 1000;
  int Ccol_ = -1;
  bool memory_modelled_ = false;
  std::vector<double> collb_, colub_, obj_;
  std::vector<char> integer_;
  std::vector<Row> rows_;
  std::vector<int> xbase_, S_;
  std::vector<double> slo_, shi_;  // bounds of S_, model units
  std::vector<OpPair> op_pairs_;
  std::vector<JobCols> jobs_;
  std::vector<JobPair> job_pairs_;
  // (tensor a < tensor b) of two producers -> o: a's jobs go first on every channel they share
  // with b's. The channels serve requests in order, so one order holds for every destination.
  std::map<std::pair<std::int32_t, std::int32_t>, int> tensor_order_;

  int col(double lb, double ub, bool is_int, double o = 0) {
    collb_.push_back(lb);
    colub_.push_back(ub);
    obj_.push_back(o);
    integer_.push_back(is_int ? 1 : 0);
    return static_cast<int>(collb_.size() - 1);
  }
  // CBC wants one entry per column in a row: entries of one column (two ops of one unit) are summed.
  void row(Row r) {
    for (std::size_t a = 1; a < r.idx.size(); ++a)
      for (std::size_t b = 0; b < a; ++b)
        if (r.idx[a] == r.idx[b]) {
          r.val[b] += r.val[a];
          r.idx.erase(r.idx.begin() + static_cast<std::ptrdiff_t>(a));
          r.val.erase(r.val.begin() + static_cast<std::ptrdiff_t>(a));
          --a;
          break;
        }
    rows_.push_back(std::move(r));
  }
  double pmax(OpId v) const {
    const auto& cv = pb_.cost[static_cast<std::size_t>(v)];
    return *std::max_element(cv.begin(), cv.end()) * scale_;
  }
  int x(OpId v, std::int32_t d) const { return xbase_[static_cast<std::size_t>(pb_.unit[static_cast<std::size_t>(v)])] + d; }
  // adds p_v (scaled) with sign `sign` to row r; returns the constant part
  double add_p(Row& r, OpId v, double sign) {
    const auto& cv = pb_.cost[static_cast<std::size_t>(v)];
    if (std::all_of(cv.begin(), cv.end(), [&](double t) { return t == cv[0]; })) return sign * cv[0] * scale_;
    for (std::int32_t d = 0; d < pb_.k; ++d)
      if (cv[static_cast<std::size_t>(d)] != 0) {
        r.idx.push_back(x(v, d));
        r.val.push_back(sign * cv[static_cast<std::size_t>(d)] * scale_);
      }
    return 0.0;
  }
  // adds coef * (p.i first) to row r
  static void add_first(Row& r, const JobPair& p, double coef) {
    r.idx.push_back(p.o);
    r.val.push_back(p.flip ? -coef : coef);
    if (p.flip) r.hi -= coef;
  }
  // adds sign * (the job's duration) to row r
  void add_duration(Row& r, const JobCols& j, double sign) const {
    r.idx.push_back(j.D >= 0 ? j.D : j.a);
    r.val.push_back(sign * (j.D >= 0 ? 1.0 : j.T));
  }
  // The device (p.i's or p.j's) of the first reader of their tensor on either, under placement dev.
  std::int32_t first_reader_on(const JobPair& p, const std::vector<std::int32_t>& dev) const {
    const JobCols& a = jobs_[static_cast<std::size_t>(p.i)];
    const JobCols& b = jobs_[static_cast<std::size_t>(p.j)];
    for (OpId w : pb_.xfers[static_cast<std::size_t>(ct_.jobs[static_cast<std::size_t>(p.i)].first)].readers) {
      const std::int32_t d = dev.empty() ? 0 : dev[static_cast<std::size_t>(w)];
      if (d == a.d || d == b.d) return d;
    }
    return -1;
  }

  void build(bool with_memory, bool sym, double H) {
    const OpGraph& g = pb_.g;
    const Cluster& c = pb_.c;
    const auto K = static_cast<std::size_t>(pb_.k);
    if (H <= 0) H = 1e-9;
    scale_ = 1000.0 / H;
    const double M = M_;

    Ccol_ = col(0, M, false, 1.0);
    xbase_.resize(static_cast<std::size_t>(pb_.num_units));
    for (std::int32_t u = 0; u < pb_.num_units; ++u) {
      xbase_[static_cast<std::size_t>(u)] = static_cast<int>(collb_.size());
      Row r{{}, {}, 1, 1};
      for (std::int32_t d = 0; d < pb_.k; ++d) {
        r.idx.push_back(col(0, 1, true));
        r.val.push_back(1);
      }
      row(std::move(r));
    }
    // S_v within [head_v, H - tail_v] (each op at its cheapest, no transfer): every schedule of
    // makespan <= H has its starts there, and the bounds give each big-M its pair's own span
    std::vector<double> head(static_cast<std::size_t>(pb_.n), 0.0), tail(static_cast<std::size_t>(pb_.n), 0.0);
    const auto topo = g.topo_order();
    for (OpId v : topo)
      for (OpId u : g.pred(v)) head[static_cast<std::size_t>(v)] = std::max(head[static_cast<std::size_t>(v)], head[static_cast<std::size_t>(u)] + pb_.pmin(u));
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      double t = 0;
      for (OpId w : g.succ(*it)) t = std::max(t, tail[static_cast<std::size_t>(w)]);
      tail[static_cast<std::size_t>(*it)] = t + pb_.pmin(*it);
    }
    const double slack = 1e-6;  // model units: float noise of a simulated start at its bound
    S_.resize(static_cast<std::size_t>(pb_.n));
    slo_.resize(static_cast<std::size_t>(pb_.n));
    shi_.resize(static_cast<std::size_t>(pb_.n));
    for (OpId v = 0; v < pb_.n; ++v) {
      const auto i = static_cast<std::size_t>(v);
      slo_[i] = std::max(0.0, head[i] * scale_ - slack);
      shi_[i] = std::max(slo_[i], std::min(M, (H - tail[i]) * scale_ + slack));
      S_[i] = col(slo_[i], shi_[i], false);
    }
    // makespan: sinks and device loads
    for (OpId v = 0; v < pb_.n; ++v)
      if (g.out_degree(v) == 0) {
        Row r{{Ccol_, S_[static_cast<std::size_t>(v)]}, {1, -1}, 0, kInf};
        r.lo = -add_p(r, v, -1);
        row(std::move(r));
      }
    if (pb_.k > 1)
      for (std::int32_t d = 0; d < pb_.k; ++d) {
        Row r{{Ccol_}, {1}, 0, kInf};
        for (OpId v = 0; v < pb_.n; ++v)
          if (pb_.p(v, d) > 0) {
            r.idx.push_back(x(v, d));
            r.val.push_back(-pb_.p(v, d) * scale_);
          }
        row(std::move(r));
      }
    // precedence with the transfer delays over idle links
    for (const Dep& e : pb_.deps) {
      Row r{{S_[static_cast<std::size_t>(e.v)], S_[static_cast<std::size_t>(e.u)]}, {1, -1}, 0, kInf};
      r.lo = -add_p(r, e.u, -1);
      const bool same_unit = pb_.unit[static_cast<std::size_t>(e.u)] == pb_.unit[static_cast<std::size_t>(e.v)];
      if (pb_.k > 1 && !same_unit) {
        double tmax = 0, tmin = kInf;
        for (std::int32_t a = 0; a < pb_.k; ++a)
          for (std::int32_t b = 0; b < pb_.k; ++b)
            if (a != b) {
              tmax = std::max(tmax, pb_.delay(e, a, b));
              tmin = std::min(tmin, pb_.delay(e, a, b));
            }
        if (tmax > 0) {
          if (tmax - tmin <= 1e-12 * tmax) {  // delay = T y, y >= x[u][d] - x[v][d]
            const int y = col(0, 1, false);
            for (std::int32_t d = 0; d < pb_.k; ++d) row({{y, x(e.u, d), x(e.v, d)}, {1, -1, 1}, 0, kInf});
            r.idx.push_back(y);
            r.val.push_back(-tmax * scale_);
          } else {  // delay >= T(a, b) (x[u][a] + x[v][b] - 1)
            const int y = col(0, M, false);
            for (std::int32_t a = 0; a < pb_.k; ++a)
              for (std::int32_t b = 0; b < pb_.k; ++b) {
                const double t = pb_.delay(e, a, b) * scale_;
                if (a != b && t > 0) row({{y, x(e.u, a), x(e.v, b)}, {1, -t, -t}, -t, kInf});
              }
            r.idx.push_back(y);
            r.val.push_back(-1);
          }
        }
      }
      row(std::move(r));
    }
    // no overlap of unordered ops on one device
    for (OpId u = 0; u < pb_.n; ++u)
      for (OpId v = u + 1; v < pb_.n; ++v) {
        if (pb_.reaches(u, v) || pb_.reaches(v, u) || (pb_.zero_time(u) && pb_.zero_time(v))) continue;
        OpPair pr{u, v, col(0, 1, true)};
        int s = -1;  // same device (-1: same unit, always together)
        if (pb_.unit[static_cast<std::size_t>(u)] != pb_.unit[static_cast<std::size_t>(v)] && pb_.k > 1) {
          s = col(0, 1, false);
          for (std::int32_t d = 0; d < pb_.k; ++d) row({{s, x(u, d), x(v, d)}, {1, -1, -1}, -1, kInf});
        }
        // S_u + p_u - S_v + Mu o + Mu s <= 2Mu ; S_v + p_v - S_u - Mv o + Mv s <= Mv  (s == 1 when fixed),
        // Mu the most S_u + p_u - S_v can be (u's latest end, v's earliest start)
        const auto iu = static_cast<std::size_t>(u), iv = static_cast<std::size_t>(v);
        const double Mu = std::clamp(shi_[iu] + pmax(u) - slo_[iv], 1e-3, M), Mv = std::clamp(shi_[iv] + pmax(v) - slo_[iu], 1e-3, M);
        Row a{{S_[iu], S_[iv], pr.o}, {1, -1, Mu}, -kInf, 2 * Mu};
        Row b{{S_[iv], S_[iu], pr.o}, {1, -1, -Mv}, -kInf, Mv};
        if (s >= 0) {
          a.idx.push_back(s);
          a.val.push_back(Mu);
          b.idx.push_back(s);
          b.val.push_back(Mv);
        } else {
          a.hi -= Mu;
          b.hi -= Mv;
        }
        a.hi -= add_p(a, u, 1);
        b.hi -= add_p(b, v, 1);
        row(std::move(a));
        row(std::move(b));
        op_pairs_.push_back(pr);
      }
    build_channels();
    // memory
    {
      double total = 0, tensors = 0, smallest = kInf;
      for (const Op& o : g.ops()) total += static_cast<double>(detail::base::op_footprint(o));
      for (const TensorInfo& t : g.tensors()) tensors += static_cast<double>(t.bytes);
      for (std::int32_t d = 0; d < pb_.k; ++d) smallest = std::min(smallest, static_cast<double>(c.spec(d).memory_bytes));
      memory_modelled_ = with_memory && total + (pb_.k - 1) * tensors > smallest;
      if (memory_modelled_) {
        std::vector<Row> mem(K);
        for (std::int32_t d = 0; d < pb_.k; ++d) {
          const double cap = static_cast<double>(c.spec(d).memory_bytes);
          Row& r = mem[static_cast<std::size_t>(d)];
          r.lo = -kInf;
          r.hi = 1;
          for (OpId v = 0; v < pb_.n; ++v)
            if (detail::base::op_footprint(g.op(v)) > 0) {
              r.idx.push_back(x(v, d));
              r.val.push_back(static_cast<double>(detail::base::op_footprint(g.op(v))) / cap);
            }
        }
        for (TensorId t = 0; t < g.num_tensors(); ++t) {
          const TensorInfo& ti = g.tensor(t);
          if (ti.bytes <= 0) continue;
          std::vector<OpId> cons;
          const auto succ = g.succ(ti.producer);
          const auto st = g.succ_tensors(ti.producer);
          for (std::size_t e = 0; e < succ.size(); ++e)
            if (st[e] == t && pb_.unit[static_cast<std::size_t>(succ[e])] != pb_.unit[static_cast<std::size_t>(ti.producer)] &&
                std::find(cons.begin(), cons.end(), succ[e]) == cons.end())
              cons.push_back(succ[e]);
          if (cons.empty()) continue;
          for (std::int32_t d = 0; d < pb_.k; ++d) {
            const int r = col(0, 1, false);
            for (OpId w : cons) row({{r, x(w, d), x(ti.producer, d)}, {1, -1, 1}, 0, kInf});
            mem[static_cast<std::size_t>(d)].idx.push_back(r);
            mem[static_cast<std::size_t>(d)].val.push_back(static_cast<double>(ti.bytes) / static_cast<double>(c.spec(d).memory_bytes));
          }
        }
        for (Row& r : mem) row(std::move(r));
      }
    }
    // symmetry: unit j (in topological order of first ops) on device d >= 1 only if an earlier unit is on d - 1
    if (sym)
      for (std::size_t j = 0; j < pb_.unit_order.size(); ++j)
        for (std::int32_t d = 1; d < pb_.k; ++d) {
          Row r{{xbase_[static_cast<std::size_t>(pb_.unit_order[j])] + d}, {1}, -kInf, 0};
          for (std::size_t i = 0; i < j; ++i) {
            r.idx.push_back(xbase_[static_cast<std::size_t>(pb_.unit_order[i])] + d - 1);
            r.val.push_back(-1);
          }
          row(std::move(r));
        }
  }

  // Transfer jobs and their channel rows (the contention part of the model).
  void build_channels() {
    const double M = M_;
    const Cluster& c = pb_.c;
    for (const auto& [xi, d] : ct_.jobs) {
      const Problem::Xfer& xf = pb_.xfers[static_cast<std::size_t>(xi)];
      JobCols j;
      j.u = xf.u;
      j.d = d;
      j.R = col(0, M, false);
      j.a = col(0, 1, false);
      // active when a reader is on d and the producer is not
      for (OpId w : xf.readers) row({{j.a, x(w, d), x(xf.u, d)}, {1, -1, 1}, 0, kInf});
      double tmax = 0, tmin = kInf;
      for (std::int32_t s = 0; s < pb_.k; ++s)
        if (s != d) {
          tmax = std::max(tmax, c.transfer_time(s, d, xf.bytes));
          tmin = std::min(tmin, c.transfer_time(s, d, xf.bytes));
        }
      if (tmax - tmin <= 1e-12 * tmax) {
        j.T = tmax * scale_;
      } else {  // D >= T(s, d) (x[u][s] + a - 1)
        j.D = col(0, M, false);
        for (std::int32_t s = 0; s < pb_.k; ++s)
          if (s != d) {
            const double t = c.transfer_time(s, d, xf.bytes) * scale_;
            row({{j.D, x(xf.u, s), j.a}, {1, -t, -t}, -t, kInf});
          }
      }
      // requested when the producer completes
      Row req{{j.R, S_[static_cast<std::size_t>(xf.u)]}, {1, -1}, 0, kInf};
      req.lo = -add_p(req, xf.u, -1);
      row(std::move(req));
      // a reader on d starts after the arrival: S_w >= R + D - M (1 - x[w][d])
      for (OpId w : xf.readers) {
        Row r{{S_[static_cast<std::size_t>(w)], j.R, x(w, d)}, {1, -1, -M}, -M, kInf};
        add_duration(r, j, -1);
        row(std::move(r));
      }
      jobs_.push_back(j);
    }
    for (const auto& [i, jj] : ct_.pairs) {
      const JobCols& A = jobs_[static_cast<std::size_t>(i)];
      const JobCols& B = jobs_[static_cast<std::size_t>(jj)];
      const auto xa = ct_.jobs[static_cast<std::size_t>(i)].first, xb = ct_.jobs[static_cast<std::size_t>(jj)].first;
      JobPair p{i, jj, -1, -1, xa == xb};
      const bool same_u = A.u == B.u;
      if (!same_u) {
        // the request order, whether or not they share a channel: F_a <= F_b + M (1 - o), F_b <= F_a + M o
        const auto key = std::minmax(xa, xb);
        p.shared = true;
        p.flip = xa != key.first;
        auto [it, fresh] = tensor_order_.emplace(key, -1);
        if (fresh) {
          const OpId ua = pb_.xfers[static_cast<std::size_t>(key.first)].u, ub = pb_.xfers[static_cast<std::size_t>(key.second)].u;
          it->second = col(0, 1, true);
          // a path orders the completions (a zero-time op still completes after its producer's event)
          if (pb_.reaches(ua, ub)) collb_[static_cast<std::size_t>(it->second)] = 1;
          else if (pb_.reaches(ub, ua)) colub_[static_cast<std::size_t>(it->second)] = 0;
          Row fa{{S_[static_cast<std::size_t>(ua)], S_[static_cast<std::size_t>(ub)], it->second}, {1, -1, M}, -kInf, M};
          fa.hi -= add_p(fa, ua, 1);
          fa.hi -= add_p(fa, ub, -1);
          Row fb{{S_[static_cast<std::size_t>(ub)], S_[static_cast<std::size_t>(ua)], it->second}, {1, -1, -M}, -kInf, 0};
          fb.hi -= add_p(fb, ub, 1);
          fb.hi -= add_p(fb, ua, -1);
          row(std::move(fa));
          row(std::move(fb));
        }
        p.o = it->second;
      } else {
        p.o = col(0, 1, true);
        if (xa != xb) {
          p.fixed = pb_.xfers[static_cast<std::size_t>(xa)].t < pb_.xfers[static_cast<std::size_t>(xb)].t ? 1 : 0;
          collb_[static_cast<std::size_t>(p.o)] = colub_[static_cast<std::size_t>(p.o)] = p.fixed;
        }
      }
      // sh: both active on a common channel
      const int sh = col(0, 1, false);
      const bool same_sender_unit = pb_.unit[static_cast<std::size_t>(A.u)] == pb_.unit[static_cast<std::size_t>(B.u)];
      const ChannelModel cm = c.channels;
      if (same_sender_unit) row({{sh, A.a, B.a}, {1, -1, -1}, -1, kInf});
      else
        for (std::int32_t e = 0; e < pb_.k; ++e) row({{sh, A.a, B.a, x(A.u, e), x(B.u, e)}, {1, -1, -1, -1, -1}, -3, kInf});
      if (cm != ChannelModel::sender && A.d == B.d) row({{sh, A.a, B.a}, {1, -1, -1}, -1, kInf});
      if (cm == ChannelModel::shared) {
        row({{sh, A.a, B.a, x(A.u, B.d)}, {1, -1, -1, -1}, -2, kInf});
        row({{sh, A.a, B.a, x(B.u, A.d)}, {1, -1, -1, -1}, -2, kInf});
      }
      // i first: R_A + D_A <= R_B ; else R_B + D_B <= R_A (when sh)
      Row a{{A.R, B.R, sh}, {1, -1, M}, -kInf, 2 * M};
      add_duration(a, A, 1);
      add_first(a, p, M);
      Row b{{B.R, A.R, sh}, {1, -1, M}, -kInf, M};
      add_duration(b, B, 1);
      add_first(b, p, -M);
      row(std::move(a));
      row(std::move(b));
      if (same_u && p.same_tensor) {  // destinations in the order of their first readers
        const auto& rd = pb_.xfers[static_cast<std::size_t>(xa)].readers;
        for (std::size_t k = 0; k < rd.size(); ++k) {
          // o >= x[w_k][A.d] - sum_{l<k} (x[w_l][A.d] + x[w_l][B.d]) ; o <= 1 - x[w_k][B.d] + (the same sum)
          Row lo{{p.o, x(rd[k], A.d)}, {1, -1}, 0, kInf};
          Row hi{{p.o, x(rd[k], B.d)}, {1, 1}, -kInf, 1};
          for (std::size_t l = 0; l < k; ++l) {
            lo.idx.insert(lo.idx.end(), {x(rd[l], A.d), x(rd[l], B.d)});
            lo.val.insert(lo.val.end(), {1, 1});
            hi.idx.insert(hi.idx.end(), {x(rd[l], A.d), x(rd[l], B.d)});
            hi.val.insert(hi.val.end(), {-1, -1});
          }
          row(std::move(lo));
          row(std::move(hi));
        }
      }
      job_pairs_.push_back(p);
    }
  }
};

}  // namespace go::detail::exact
#endif
