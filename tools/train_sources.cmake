# The sources of `tapegrad train`, `sample` and `inspect` (tools/CMakeLists.txt's
# tapegrad_train_cmds, and fuzz/'s train_init_fuzz, which compiles them with its sanitizers).
set(TAPEGRAD_TRAIN_CMD_SOURCES
  arch.cpp
  arch_cnn.cpp
  arch_gpt.cpp
  arch_llama.cpp
  train_cmd.cpp
  train_run.cpp
  train_args.cpp
  train_data.cpp
  train_dist.cpp
  checkpoint.cpp
  metrics.cpp
  loss_plot.cpp
  sample_cmd.cpp
  inspect_cmd.cpp
  heatmap.cpp
)
list(TRANSFORM TAPEGRAD_TRAIN_CMD_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/tools/)
