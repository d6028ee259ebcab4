# Baselines (include/go/baselines): METIS for the k-way partitioning placer. Without
# METIS the library still builds and the `metis` method reports that it is unavailable.
if(METIS_LIBRARY AND METIS_INCLUDE_DIR)
  target_include_directories(go PUBLIC ${METIS_INCLUDE_DIR})
  target_link_libraries(go PUBLIC ${METIS_LIBRARY})
  target_compile_definitions(go PUBLIC GO_WITH_METIS=1)
else()
  message(STATUS "go: METIS not found; the metis baseline is disabled")
endif()

# CBC (COIN-OR branch and cut, Debian coinor-libcbc-dev) for the `exact` MILP placer
# (go/baselines/exact.hpp). Its C interface is all of libCbcSolver that go calls; the shared library
# brings Cbc, Cgl, Clp, Osi and CoinUtils itself. pkg-config, when there, only hints where it is.
# Without CBC the library still builds and `exact` says how to install it.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(GO_CBC_HINT QUIET cbc)
endif()
find_path(CBC_INCLUDE_DIR Cbc_C_Interface.h HINTS ${GO_CBC_HINT_INCLUDE_DIRS} PATH_SUFFIXES coin coin-or)
find_library(CBC_LIBRARY CbcSolver HINTS ${GO_CBC_HINT_LIBRARY_DIRS})
if(CBC_INCLUDE_DIR AND CBC_LIBRARY)
  target_include_directories(go PUBLIC ${CBC_INCLUDE_DIR})
  target_link_libraries(go PUBLIC ${CBC_LIBRARY})
  target_compile_definitions(go PUBLIC GO_WITH_CBC=1)
  message(STATUS "go: CBC ${CBC_LIBRARY}")
else()
  message(STATUS "go: CBC not found; the exact baseline is disabled (apt-get install coinor-libcbc-dev)")
endif()
