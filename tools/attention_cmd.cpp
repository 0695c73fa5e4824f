#include "tools/commands.h"
namespace tg { void run_attention(const AttentionArgs&) { throw ValueError("todo"); } }
