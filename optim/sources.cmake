# optim/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  optim/adamw.cpp
  optim/clip_grad.cpp
  optim/lr_schedule.cpp
  optim/optimizer.cpp
  optim/sgd.cpp
)

# AdamW's update loop vectorises its square roots only without errno (see optim/adamw.cpp).
set_source_files_properties(optim/adamw.cpp PROPERTIES COMPILE_OPTIONS -fno-math-errno)
