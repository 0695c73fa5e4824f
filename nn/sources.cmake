# nn/: sources of the tapegrad library (the top-level CMakeLists.txt includes this file).
list(APPEND TAPEGRAD_SOURCES
  nn/attention.cpp
  nn/config_json.cpp
  nn/conv.cpp
  nn/embedding.cpp
  nn/flatten.cpp
  nn/gpt.cpp
  nn/gpt_config.cpp
  nn/image_classifiers.cpp
  nn/init.cpp
  nn/layer_norm.cpp
  nn/linear.cpp
  nn/llama.cpp
  nn/llama_config.cpp
  nn/module.cpp
  nn/norm.cpp
  nn/rnn.cpp
)
