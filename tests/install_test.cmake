# Installs the built tapegrad into a scratch prefix, then configures, builds and runs
# tests/consumer against it with find_package(tapegrad). Also checks that the README shows
# tests/consumer/example.cpp verbatim, so the README's example cannot rot.
# Invoked by ctest: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P install_test.cmake

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/example)
run(${WORK_DIR}/build/collide)

file(READ ${SOURCE_DIR}/tests/consumer/example.cpp example)
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "${example}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not show tests/consumer/example.cpp verbatim; copy it in")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
