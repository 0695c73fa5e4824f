# Runs examples/char_lstm for 100 steps on a repetitive generated text and checks what a user
# would see: the loss printed at the start and the end, falling below 0.5 (a uniform guess over
# the text's 11 characters is ln 11 = 2.4), and a sample that continues the text.
include(${CMAKE_CURRENT_LIST_DIR}/example_run.cmake)
file(MAKE_DIRECTORY ${WORK_DIR})
write_cat_text(${WORK_DIR}/text.txt)
run_example(out ${WORK_DIR}/text.txt 100)
printed_number(first "step 0 loss" "${out}")
printed_number(last "step 99 loss" "${out}")
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
