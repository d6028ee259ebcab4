#pragma once
// The best step time so far against simulated samples, for convergence curves
// (bench/convergence.sh). Every simulator call that evaluates a plan for a method counts as one
// sample, in the order the method made them: a method that simulates a batch in parallel records
// the batch in its own (deterministic) order once the batch is done, never in thread-finish order,
// so that the same seed gives the same curve. Only plans that fit and that the method may answer
// can improve the curve; other simulations (out of memory, a plan simulated only to scale a reward)
// still count as samples.
// A method's note ends with text(): "trace samples:seconds:ms 1:0.120:250.100 4:0.480:231.000 ..."
// (one entry per improvement; seconds since the method started), which bench/convergence.sh reads.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace go {

struct TracePoint {
  std::int64_t samples = 0;  // simulated samples, this one included
  double seconds = 0;        // since the trace's origin
  double best_step_time = 0;
};

class BestTrace {
 public:
  using Clock = std::chrono::steady_clock;
  explicit BestTrace(Clock::time_point origin = Clock::now()) : origin_(origin) {}

  // One simulated plan: `step_time` counts when `candidate` (the method may answer it) and the plan
  // fits (`valid`, finite). Returns whether it improved the best.
  bool add(bool valid, double step_time, bool candidate = true) { return add_at(valid, step_time, seconds(), candidate); }
  // The same, stamped `at` seconds (the end of the batch it belongs to).
  bool add_at(bool valid, double step_time, double at, bool candidate = true) {
    ++samples_;
    if (!candidate || !valid || !std::isfinite(step_time) || step_time >= best_) return false;
    best_ = step_time;
    points_.push_back({samples_, at, best_});
    return true;
  }

  double seconds() const { return std::chrono::duration<double>(Clock::now() - origin_).count(); }
  std::int64_t samples() const { return samples_; }
  double best() const { return best_; }  // +inf while nothing fits
  const std::vector<TracePoint>& points() const { return points_; }
  Clock::time_point origin() const { return origin_; }

  // Moves the origin to `origin` (earlier: a caller that started before the trace did), so that
  // seconds count from the caller's start.
  void rebase(Clock::time_point origin) {
    const double shift = std::chrono::duration<double>(origin_ - origin).count();
    for (TracePoint& p : points_) p.seconds += shift;
    origin_ = origin;
  }

  std::string text() const { return trace_text(points_); }

  static std::string trace_text(const std::vector<TracePoint>& points) {
    std::string s = "trace samples:seconds:ms";
    char b[96];
    for (const TracePoint& p : points) {
      std::snprintf(b, sizeof b, " %lld:%.3f:%.3f", static_cast<long long>(p.samples), p.seconds, p.best_step_time * 1e3);
      s += b;
    }
    return s;
  }

 private:
  Clock::time_point origin_;
  std::int64_t samples_ = 0;
  double best_ = std::numeric_limits<double>::infinity();
  std::vector<TracePoint> points_;
};

}  // namespace go
