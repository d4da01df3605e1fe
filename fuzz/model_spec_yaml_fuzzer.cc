// The YAML model spec (--model spec.yaml): any text either fails with an error that says
// what is wrong, or gives a spec that passes fuzz::CheckModel.
#include "fuzz/check_model.h"
#include "models/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  fuzz::CheckModelOrError(ParseModelSpecYaml(fuzz::AsText(data, size), "fuzz.yaml"));
  return 0;
}
