#pragma once
// tg::optim: SGD, AdamW, gradient clipping and the learning-rate schedule (torch.optim's
// semantics). This header only includes the real ones.

#include <tapegrad/optim/adamw.h>
#include <tapegrad/optim/clip_grad.h>
#include <tapegrad/optim/lr_schedule.h>
#include <tapegrad/optim/optimizer.h>
#include <tapegrad/optim/sgd.h>
