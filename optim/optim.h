#pragma once
// tg::optim: SGD, AdamW, gradient clipping and the learning-rate schedule (torch.optim's
// semantics). This header only includes the real ones.

#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
