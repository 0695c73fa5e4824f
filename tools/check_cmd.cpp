#include "tools/commands.h"
namespace tg { int run_check(std::ostream&) { return 1; } }
