# Runs examples/char_lstm for 100 steps on a repetitive generated text and checks what a user
# would see: the loss printed at the start and the end, falling below 0.5 (a uniform guess over
# the text's 11 characters is ln 11 = 2.4), and a sample that continues the text.
file(MAKE_DIRECTORY ${WORK_DIR})
set(text "")
foreach(i RANGE 1 300)
  string(APPEND text "the cat sat on the mat. ")
endforeach()
file(WRITE ${WORK_DIR}/text.txt "${text}")
execute_process(COMMAND ${EXE} ${WORK_DIR}/text.txt 100
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "char_lstm exited ${rc}: ${err}")
endif()
string(REGEX MATCH "step 0 loss ([0-9.]+)" _ "${out}")
set(first ${CMAKE_MATCH_1})
string(REGEX MATCH "step 99 loss ([0-9.]+)" _ "${out}")
set(last ${CMAKE_MATCH_1})
if(NOT first OR NOT last)
  message(FATAL_ERROR "char_lstm did not print the first and last losses:\n${out}")
endif()
if(NOT last LESS first OR NOT last LESS 0.5)
  message(FATAL_ERROR "the loss did not fall below 0.5 (first ${first}, last ${last}):\n${out}")
endif()
# The prompt is the text's first 8 characters; the 300 after it are the model's, drawn from its
# distribution (so a rare slip is allowed): at least 6 whole sentences of the text among them.
string(REGEX MATCH "sample: [^\n]*" sample "${out}")
string(REGEX MATCHALL "the cat sat on the mat\\." sentences "${sample}")
list(LENGTH sentences n)
if(n LESS 6)
  message(FATAL_ERROR "the sample does not continue the text (${n} sentences of it):\n${out}")
endif()
