// The safetensors header (--weights, and the training state): any file either fails with
// an error or gives entries whose byte ranges lie within the file and hold exactly their
// shape and dtype, so reading them can never run past the data.
#include "fuzz/fuzz_input.h"
#include "runtime/formats/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const Result<SafetensorsHeader> header =
      ParseSafetensorsBytes(fuzz::AsText(data, size), "fuzz.safetensors");
  if (!header) return 0;
  const auto data_size = static_cast<int64_t>(size) - header->data_start;
  fuzz::Require(data_size >= 0, "the data section starts within the file");
  for (const auto& [name, e] : header->entries) {
    fuzz::Require(0 <= e.begin && e.begin <= e.end && e.end <= data_size, "range within data");
    int64_t bytes = SafetensorsElementSize(e.dtype);
    bool overflow = false;
    for (int64_t d : e.shape) overflow |= __builtin_mul_overflow(bytes, d, &bytes);
    bool empty = false;
    for (int64_t d : e.shape) empty |= d == 0;
    if (empty) bytes = 0;
    fuzz::Require(empty || !overflow, "a non-empty tensor's size fits the data");
    fuzz::Require(bytes == e.end - e.begin, "the range holds the shape and dtype exactly");
  }
  return 0;
}
