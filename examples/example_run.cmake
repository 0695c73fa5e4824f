# What the example tests share (included by each *_test.cmake, run with cmake -P): running the
# example and reading the numbers it prints.

# Writes the repetitive text the text examples train on: "the cat sat on the mat. " 300 times.
function(write_cat_text path)
  string(REPEAT "the cat sat on the mat. " 300 text)
  file(WRITE ${path} "${text}")
endfunction()

# Runs ${EXE} with ARGN; its standard output in `out_var`. A nonzero exit fails the test with the
# example's standard error.
function(run_example out_var)
  execute_process(COMMAND ${EXE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} exited ${rc}: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# The number printed after `label` in `out` ("step 0 loss 2.42": 2.42); a test failure showing
# the output when there is none.
function(printed_number var label out)
  string(REGEX MATCH "${label} ([0-9.]+)" _ "${out}")
  if("${CMAKE_MATCH_1}" STREQUAL "")
    message(FATAL_ERROR "no '${label} <number>' printed:\n${out}")
  endif()
  set(${var} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()
