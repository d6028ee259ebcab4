# ctest python:install: installs the python component of the build into a fresh prefix, then checks
# with that prefix's module folder alone on PYTHONPATH that the installed module is the one imported,
# that it finds the installed policy (not the source tree's), and that GO runs from it.
#   cmake -DBUILD=<build> -DPREFIX=<dir> -DPYTHON=<python3> -DMODULE_DIR=<relative dir> -P install_test.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} --component python
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install --component python failed (${rc})")
endif()
set(check [=[
import os, sys, gopt
prefix = os.path.realpath(sys.argv[1])
assert os.path.realpath(gopt.__file__).startswith(prefix + os.sep), gopt.__file__
policy = os.path.realpath(gopt.default_policy())
assert policy == os.path.join(prefix, "share", "go", "policies", "go-zoo-v100x248.ckpt"), policy
g = gopt.Graph.from_arrays(kinds=["input", "matmul", "relu"], edges=[[0, 1], [1, 2]],
                           flops=[0, 2e9, 1e6], output_bytes=[4 << 20, 4 << 20, 4 << 20])
r = gopt.place(g, "v100x2", "go-zero-shot")
assert r.valid and r.step_time_ms > 0, r
print("installed module", gopt.__file__, "policy", policy, "go-zero-shot", r.step_time_ms, "ms")
]=])
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=GO_POLICY PYTHONPATH=${PREFIX}/${MODULE_DIR}
                        ${PYTHON} -c "${check}" ${PREFIX}
                WORKING_DIRECTORY ${PREFIX}  # not the build's python/, which `-c` would put first on sys.path
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed module failed its check (${rc})")
endif()
