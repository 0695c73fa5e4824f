# Runs tests/dist_error_main.cpp under mpirun and checks how the ranks end: within the timeout
# (no rank left waiting), with the expected exit status, and with the failure reported on
# exactly one stderr line. Under Open MPI, mpirun -q drops mpirun's own notices, so that line
# must then be all of stderr. Invoked by ctest:
#   cmake -DMPIEXEC=... "-DMPIEXEC_FLAGS=..." -DPROGRAM=... -DMODE=agree|abort -DSTATUS=N
#         "-DLINE=TEXT" -P dist_error_check.cmake
set(quiet)
if(MPIEXEC_FLAGS MATCHES "--oversubscribe")  # Open MPI's mpirun
  set(quiet -q)
endif()
execute_process(
  COMMAND ${MPIEXEC} ${quiet} -np 2 ${MPIEXEC_FLAGS} ${PROGRAM} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc STREQUAL "${STATUS}")
  message(FATAL_ERROR "mode ${MODE}: exit status '${rc}', expected ${STATUS}\n${out}\n${err}")
endif()
string(FIND "${err}" "${LINE}" first)
string(FIND "${err}" "${LINE}" last REVERSE)
if(first EQUAL -1 OR NOT first EQUAL last)
  message(FATAL_ERROR "mode ${MODE}: '${LINE}' not on exactly one stderr line\n${err}")
endif()
string(STRIP "${err}" stripped)
if(quiet AND NOT stripped STREQUAL LINE)
  message(FATAL_ERROR "mode ${MODE}: stderr is more than the one line '${LINE}':\n${err}")
endif()
