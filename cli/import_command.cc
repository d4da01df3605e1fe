#include "cli/import_command.h"

#include <fmt/format.h>

#include "models/model_import.h"
#include "planner/core/file_io.h"

namespace headroom {

void AddImportFlags(CLI::App& command, ImportFlags& flags) {
  AddRequestFlags(command, flags.request);
  command.add_option("--out", flags.out, "The graph file to write")->required();
}

int RunImportCommand(const ImportFlags& flags) {
  PlanFlags request_flags = flags.request;
  // PEFT takes module names; a built type's short role names (q, v) would match none.
  if (request_flags.lora_targets.empty()) request_flags.lora_targets = {"q_proj", "v_proj"};
  Result<PlanRequest> request = ToPlanRequest(request_flags);
  if (!request) return ReportUsageError(request.error().message);
  if (auto error = CheckOutputFlags({{"--out", flags.out}}))
    return ReportUsageError(error->message);
  Result<std::string> text = ImportGraphFileFor(
      request_flags.model, GraphOptionsOf(request->config), request_flags.trust_remote_code);
  if (!text) return ReportUsageError(text.error().message);
  if (auto error = WriteFileAtomically(flags.out, *text)) return ReportRunFailure(error->message);
  PrintReport(
      fmt::format("wrote {}: plan it with `headroom plan --model {}` and the same "
                  "training flags\n",
                  flags.out, flags.out));
  return 0;
}

}  // namespace headroom
