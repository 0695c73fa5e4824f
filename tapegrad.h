#pragma once
// tapegrad: reverse-mode automatic differentiation on Eigen, and a GPT you can train with it.
// This header only includes the real ones; include it, or just the pieces you use.

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/grad_ready.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/storage.h>
#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/ops/op_list.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/embedding.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/init.h>
#include <tapegrad/nn/layer_norm.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/nn/module.h>
#include <tapegrad/nn/norm.h>
#include <tapegrad/nn/rnn.h>
#include <tapegrad/optim/optim.h>
#include <tapegrad/io/npy.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/data/batches.h>
#include <tapegrad/data/idx.h>
#include <tapegrad/data/induction.h>
#include <tapegrad/data/text.h>
#include <tapegrad/data/tokenizer.h>
#include <tapegrad/dist/communicator.h>
#include <tapegrad/dist/data_parallel.h>
#include <tapegrad/dist/reducer.h>
#include <tapegrad/check/checker.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/check/registry.h>
