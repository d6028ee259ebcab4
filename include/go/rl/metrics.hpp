#pragma once
// What one PPO update (or search round) did, and the metrics CSV that `gopt train --metrics` and
// gopt.train(metrics=...) write one row of per update (go/rl/ppo.hpp makes the stats).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "go/core/error.hpp"
#include "go/core/file.hpp"

namespace go::rl {

// What one update did (also one row of the metrics CSV).
struct UpdateStats {
  std::int64_t update = 0;        // 1-based: updates completed after this one
  double lr = 0;
  double mean_reward = 0, max_reward = 0;
  double best_step_time = std::numeric_limits<double>::infinity();   // the best valid step time so far, of the first graph of the update
  double best_speedup = 0;        // reference / best step time, mean over the update's graphs
  double mean_step_time = std::numeric_limits<double>::infinity();   // mean over valid samples (first graph)
  double invalid_fraction = 0;
  double entropy = 0;             // mean per-row entropy (sum over the three tasks)
  double approx_kl = 0, clip_fraction = 0;
  double policy_loss = 0, value_loss = 0, explained_variance = 0;
  double grad_norm = 0;
  int epochs_run = 0;
  std::int64_t samples = 0;
  double seconds = 0, samples_per_second = 0;
  // where the update's wall time went: sampling pass(es), decoding + simulation (the samples' and the
  // critical-path moves'), gradient epochs
  double sample_seconds = 0, simulate_seconds = 0, train_seconds = 0;
};

inline const char* metrics_csv_header() {
  return "update,lr,mean_reward,max_reward,best_step_time_ms,best_speedup,mean_step_time_ms,invalid_fraction,entropy,"
         "approx_kl,clip_fraction,policy_loss,value_loss,explained_variance,grad_norm,epochs_run,samples,seconds,"
         "samples_per_second,sample_seconds,simulate_seconds,train_seconds";
}

inline std::string metrics_csv_row(const UpdateStats& s) {
  auto ms = [](double t) { return std::isfinite(t) ? t * 1e3 : -1.0; };
  char buf[640];
  std::snprintf(buf, sizeof buf, "%lld,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%lld,%.4g,%.6g,%.4g,%.4g,%.4g",
                static_cast<long long>(s.update), s.lr, s.mean_reward, s.max_reward, ms(s.best_step_time),
                s.best_speedup, ms(s.mean_step_time), s.invalid_fraction, s.entropy, s.approx_kl, s.clip_fraction,
                s.policy_loss, s.value_loss, s.explained_variance, s.grad_norm, s.epochs_run,
                static_cast<long long>(s.samples), s.seconds, s.samples_per_second, s.sample_seconds,
                s.simulate_seconds, s.train_seconds);
  return buf;
}

// Keeps the header and the rows of updates <= `keep_updates` of an existing metrics CSV (resume
// drops what the interrupted run wrote after its last checkpoint); creates it with a header when
// missing.
inline void truncate_metrics_csv(const std::string& path, std::int64_t keep_updates) {
  check_file_name(path);
  std::string out = std::string(metrics_csv_header()) + "\n";
  std::ifstream in(path);
  if (in) {
    std::string line;
    bool first = true;
    while (std::getline(in, line)) {
      if (first) {
        first = false;
        continue;
      }
      if (line.empty()) continue;
      const long long u = std::atoll(line.c_str());
      if (u >= 1 && u <= keep_updates) out += line + "\n";
    }
  }
  write_file_atomic(path, out);
}

inline void append_metrics_csv(const std::string& path, const UpdateStats& s) {
  check_file_name(path);
  std::ofstream f(path, std::ios::app);
  GO_CHECK(f.good(), path, ": cannot open the metrics file for appending");
  f << metrics_csv_row(s) << "\n";
  GO_CHECK(f.good(), path, ": cannot write the metrics file");
}

}  // namespace go::rl
