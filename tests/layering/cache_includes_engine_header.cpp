// Compiled as part of the cache layer: the engine's public header belongs
// to the layer above, so this include must not be found either.
#include "rapidqa/qa_engine.h"

int rapidqa_layering_probe_public() { return 0; }
