# ops/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  ops/add.cpp
  ops/add_mask.cpp
  ops/broadcast_to.cpp
  ops/causal_attention.cpp
  ops/gemm.cpp
  ops/matmul.cpp
  ops/mul.cpp
  ops/permute.cpp
  ops/reshape.cpp
  ops/rope.cpp
  ops/scale.cpp
  ops/softmax.cpp
  ops/sub.cpp
  ops/sum.cpp
  ops/sum_of_squares.cpp
  ops/sum_to.cpp
  ops/transpose.cpp
)
