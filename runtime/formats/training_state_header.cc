#include "runtime/formats/training_state_header.h"

#include <fmt/format.h>

#include "planner/core/limits.h"
#include "planner/core/number_parse.h"

namespace headroom {

std::map<std::string, std::string> TrainingStateMetadata(const TrainingStateInfo& info) {
  return {{"format", std::string(kTrainingStateFormat)},
          {"format_version", std::to_string(kTrainingStateVersion)},
          {"fingerprint", info.fingerprint},
          {"steps", std::to_string(info.steps)}};
}

Result<TrainingStateInfo> ReadTrainingStateInfo(const std::map<std::string, std::string>& metadata,
                                                std::string_view where) {
  const auto field = [&](const char* key) -> const std::string* {
    auto it = metadata.find(key);
    return it == metadata.end() ? nullptr : &it->second;
  };
  const std::string* format = field("format");
  if (!format || *format != kTrainingStateFormat)
    return MakeError(fmt::format("{}: not a headroom training state", where));
  const std::string* version = field("format_version");
  Result<int64_t> v = version ? ParseInteger(*version, 1, kTrainingStateVersion, "format_version")
                              : MakeError("no format_version");
  if (!v)
    return MakeError(fmt::format("{}: a training state of another headroom version ({})", where,
                                 v.error().message));
  const std::string* fingerprint = field("fingerprint");
  const std::string* steps = field("steps");
  if (!fingerprint || !steps)
    return MakeError(
        fmt::format("{}: a corrupted training state (no fingerprint or steps)", where));
  Result<int64_t> n = ParseInteger(*steps, 0, limits::kMaxSteps, "steps");
  if (!n)
    return MakeError(fmt::format("{}: a corrupted training state ({})", where, n.error().message));
  return TrainingStateInfo{*fingerprint, *n};
}

}  // namespace headroom
