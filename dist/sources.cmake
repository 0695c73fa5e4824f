# dist/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
# The MPI communicator only when CMake found MPI (TAPEGRAD_HAVE_MPI, set at the top level).
list(APPEND TAPEGRAD_SOURCES
  dist/communicator.cpp
  dist/data_parallel.cpp
  dist/reducer.cpp
)
if(TAPEGRAD_HAVE_MPI)
  list(APPEND TAPEGRAD_SOURCES dist/mpi_communicator.cpp)
endif()
