# autograd/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  autograd/backward_pass.cpp
  autograd/error.cpp
  autograd/factories.cpp
  autograd/forward_ad.cpp
  autograd/grad_mode.cpp
  autograd/grad_ready.cpp
  autograd/hooks.cpp
  autograd/leaf_grads.cpp
  autograd/pool.cpp
  autograd/print.cpp
  autograd/shape.cpp
  autograd/static_step.cpp
  autograd/storage.cpp
  autograd/tape.cpp
  autograd/tensor.cpp
)
