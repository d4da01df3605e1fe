// The YAML model spec (--model spec.yaml): any text either fails with an error that says
// what is wrong, or gives a spec that passes fuzz::CheckModel.
#include "fuzz/check_model.h"
#include "fuzz/fuzz_input.h"
#include "models/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const Result<ModelSpec> spec = ParseModelSpecYaml(fuzz::AsText(data, size), "fuzz.yaml");
  if (spec)
    fuzz::CheckModel(*spec);
  else
    fuzz::Require(!spec.error().message.empty(), "an error says what is wrong");
  return 0;
}
