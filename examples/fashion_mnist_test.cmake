# Runs examples/fashion_mnist for 2 epochs on the first 2,048 training images of Fashion-MNIST and
# checks what a user would see: the training loss of epoch 2 below epoch 1's, and an accuracy on
# the 10,000 test images far above chance (0.1); an untrained Net scores about that.
execute_process(COMMAND ${EXE} ${DATA_DIR} 2 2048
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fashion_mnist exited ${rc}: ${err}")
endif()
string(REGEX MATCH "epoch 1 train loss ([0-9.]+)" _ "${out}")
set(first ${CMAKE_MATCH_1})
string(REGEX MATCH "epoch 2 train loss ([0-9.]+)" _ "${out}")
set(second ${CMAKE_MATCH_1})
string(REGEX MATCH "test accuracy ([0-9.]+) \\(10000 images\\)" _ "${out}")
set(accuracy ${CMAKE_MATCH_1})
if(NOT first OR NOT second OR NOT accuracy)
  message(FATAL_ERROR "fashion_mnist did not print both epochs' losses and the test accuracy:\n${out}")
endif()
if(NOT second LESS first)
  message(FATAL_ERROR "the training loss did not fall (epoch 1 ${first}, epoch 2 ${second}):\n${out}")
endif()
# 0.78 measured (seed 0, 2026-12); 0.7 leaves room for other platforms' rounding.
if(NOT accuracy GREATER 0.7)
  message(FATAL_ERROR "test accuracy ${accuracy} is not above 0.7:\n${out}")
endif()
