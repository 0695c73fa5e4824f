# autograd/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  autograd/engine.cpp
  autograd/grad_mode.cpp
  autograd/pool.cpp
  autograd/shape.cpp
  autograd/storage.cpp
  autograd/tensor.cpp
)
