// Op cases for cross_entropy, embedding, narrow, split, cat, dropout.

#include "check/registry_table.h"
#include "ops/ops.h"

namespace tg::detail {

void index_op_cases(Table& t) { (void)t; }

}  // namespace tg::detail
