// Compiled as part of the index layer: common/ and runtime/ are below it.
#include "common/guard.h"
#include "index/vector_index.h"
#include "rapidqa/status.h"
#include "runtime/work_pool.h"

int rapidqa_layering_probe_allowed() { return 0; }
