// The Hugging Face config.json import (--model config.json): any bytes either fail with
// an error that says what is wrong, or give a spec that passes fuzz::CheckModel.
#include "fuzz/check_model.h"
#include "models/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  fuzz::CheckModelOrError(ParseHfConfigJson(fuzz::AsText(data, size), "config.json"));
  return 0;
}
