# data/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  data/batch.cpp
  data/batches.cpp
  data/idx.cpp
  data/image_batches.cpp
  data/induction.cpp
  data/text.cpp
  data/tokenizer.cpp
  data/uniform.cpp
)
