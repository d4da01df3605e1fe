// The YAML model spec (--model spec.yaml): any text either fails with an error or gives a
// spec whose graph builds and whose parameter count is positive, without overflow.
#include "fuzz/fuzz_input.h"
#include "models/build_graph.h"
#include "models/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const Result<ModelSpec> spec = ParseModelSpecYaml(fuzz::AsText(data, size), "fuzz.yaml");
  if (!spec) {
    fuzz::Require(!spec.error().message.empty(), "an error says what is wrong");
    return 0;
  }
  const Result<OpGraph> graph = BuildGraph(*spec, {});
  if (graph) fuzz::Require(graph->ParameterCount() > 0, "a valid model has parameters");
  return 0;
}
