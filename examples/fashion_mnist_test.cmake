# Runs examples/fashion_mnist for 2 epochs on the first 2,048 training images of Fashion-MNIST and
# checks what a user would see: the training loss of epoch 2 below epoch 1's, and an accuracy on
# the 10,000 test images far above chance (0.1), which an untrained Net scores.
include(${CMAKE_CURRENT_LIST_DIR}/example_run.cmake)
run_example(out ${DATA_DIR} 2 2048)
printed_number(first "epoch 1 train loss" "${out}")
printed_number(second "epoch 2 train loss" "${out}")
printed_number(accuracy "test accuracy" "${out}")
if(NOT out MATCHES "\\(10000 images\\)")
  message(FATAL_ERROR "the accuracy is not on the 10000 test images:\n${out}")
endif()
if(NOT second LESS first)
  message(FATAL_ERROR "the training loss did not fall (epoch 1 ${first}, epoch 2 ${second}):\n${out}")
endif()
# 0.78 measured (seed 0); 0.7 leaves room for other platforms' rounding. 128 images reach 0.47.
if(NOT accuracy GREATER 0.7)
  message(FATAL_ERROR "test accuracy ${accuracy} is not above 0.7:\n${out}")
endif()
