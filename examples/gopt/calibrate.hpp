#pragma once
// `gopt calibrate --profiles <csv|folder>... --device <preset> --out device.json [--leave-out]
//                 [--fitted fit.json...] [--cluster-out cluster.json --count N] [--json]`:
// fits a device's roofline (launch overhead, bandwidth efficiency, compute efficiency per op kind)
// to measured profiles (include/go/sim/calibrate.hpp) and writes a one-device go-cluster JSON that
// `--cluster` of the other commands reads; --cluster-out writes the `<device>x<N>` preset cluster
// with the calibrated devices. A profile's device is its NeuSight GPU folder (label/NVIDIA_L4/...
// -> l4), else `--device`. Profiles of `--device` are fitted directly; with none (or --leave-out,
// which ignores them) the device takes the median of what the other devices' fits transfer.
// `--fitted` adds devices fitted earlier (their --out files) to that pool without re-reading
// their profiles. Bad input: one line `gopt calibrate: <file>: <problem>`, status 1.
#include <CLI/CLI.hpp>

namespace gopt {

void add_calibrate_command(CLI::App& app);

}  // namespace gopt
