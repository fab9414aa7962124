// Compiled as part of the index layer: the engine is above it, so this
// include must not be found.
#include "engine/knowledge_base.h"

int rapidqa_layering_probe_internal() { return 0; }
