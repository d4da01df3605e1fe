// The Hugging Face config.json import (--model config.json): any bytes either fail with
// an error or give a spec whose graph builds, without overflow or an escaped exception.
#include "fuzz/fuzz_input.h"
#include "models/build_graph.h"
#include "models/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const Result<ModelSpec> spec = ParseHfConfigJson(fuzz::AsText(data, size), "config.json");
  if (!spec) return 0;
  const Result<OpGraph> graph = BuildGraph(*spec, {});
  if (graph) fuzz::Require(graph->ParameterCount() > 0, "a valid model has parameters");
  return 0;
}
