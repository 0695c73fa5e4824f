# check/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  check/functional.cpp
  check/functional_forward.cpp
  check/gradcheck.cpp
  check/forward_check.cpp
  check/checker.cpp
  check/registry.cpp
  check/registry_training.cpp
  check/registry_index.cpp
  check/registry_dims.cpp
  check/registry_conv.cpp
  check/registry_norm.cpp
  check/registry_elementwise.cpp
  check/registry_losses.cpp
  check/registry_reductions.cpp
  check/registry_shape.cpp
  check/registry_ranks.cpp
)
