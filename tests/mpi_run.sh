#!/bin/sh
# Runs an MPI launcher command line for the tests: `mpi_run.sh mpirun [options] program [args]`.
# Adds --allow-run-as-root when run as root under Open MPI, and gives each rank one OpenMP
# thread (GO_MPI_OMP_THREADS to change), since the ranks share the machine's cores.
set -eu
export OMP_NUM_THREADS="${GO_MPI_OMP_THREADS:-1}"
launcher="$1"
shift
if [ "$(id -u)" = 0 ] && "$launcher" --version 2>/dev/null | grep -Eq "Open MPI|OpenRTE|open-mpi"; then
  set -- --allow-run-as-root "$@"
fi
exec "$launcher" "$@"
