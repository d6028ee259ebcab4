# Baselines (include/go/baselines): METIS for the k-way partitioning placer. Without
# METIS the library still builds and the `metis` method reports that it is unavailable.
if(METIS_LIBRARY AND METIS_INCLUDE_DIR)
  target_include_directories(go PUBLIC ${METIS_INCLUDE_DIR})
  target_link_libraries(go PUBLIC ${METIS_LIBRARY})
  target_compile_definitions(go PUBLIC GO_WITH_METIS=1)
else()
  message(STATUS "go: METIS not found; the metis baseline is disabled")
endif()
