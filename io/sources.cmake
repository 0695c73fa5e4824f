# io/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  io/file_util.cpp
  io/npy.cpp
  io/safetensors.cpp
)
