// ZeRO-3's view of the model: partitions per parameter, and the modules whose hooks
// gather them (deepspeed/runtime/zero/parameter_offload.py registers the hooks on every
// module; the coordinator gathers a module's direct parameters).
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "planner/simulate/shard_layout.h"

namespace headroom {
namespace {

// DeepSpeed's sub_group_size default (runtime/zero/config.py): the optimizer steps over
// partitions of at most this many elements at a time.
constexpr int64_t kSubGroupSize = 1'000'000'000;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string ModuleOf(const std::string& param_name) {
  const size_t dot = param_name.rfind('.');
  return dot == std::string::npos ? std::string() : param_name.substr(0, dot);
}

// The containers a module's call opens, outermost first: every prefix of its path but
// the model itself (counted apart) and a ModuleList (`layers` in `layers.3`: never called).
std::vector<std::string> ContainersOf(const std::string& path) {
  std::vector<std::string> containers;
  size_t dot = path.find('.');
  while (dot != std::string::npos) {
    const size_t next = path.find('.', dot + 1);
    const std::string_view component(path.data() + dot + 1,
                                     (next == std::string::npos ? path.size() : next) - dot - 1);
    const bool module_list =
        !component.empty() && component.find_first_not_of("0123456789") == std::string::npos;
    if (!module_list) containers.push_back(path.substr(0, dot));
    dot = next;
  }
  return containers;
}

// How many containers `path` opens after the ones in `open` (which it then replaces).
int OpenContainers(const std::string& path, std::vector<std::string>& open) {
  std::vector<std::string> now = ContainersOf(path);
  size_t common = 0;
  while (common < now.size() && common < open.size() && now[common] == open[common]) ++common;
  open = std::move(now);
  return static_cast<int>(open.size() - common);
}

// The modules holding parameters, in the order their forward first reads them. PEFT's
// lora.Linear is a container: its own weight belongs to its `base_layer`.
std::vector<std::pair<std::string, Zero3Module>> ModulesInForwardOrder(
    const OpGraph& graph, const std::vector<TensorId>& parameters,
    const std::vector<int32_t>& index_of) {
  std::unordered_set<std::string> lora_hosts;
  for (TensorId p : parameters) {
    const std::string module = ModuleOf(graph.tensor(p).name);
    if (EndsWith(module, ".lora_A")) lora_hosts.insert(module.substr(0, module.size() - 7));
  }
  std::vector<std::string> path_of;
  std::unordered_map<std::string, std::vector<size_t>> params_of;
  for (size_t i = 0; i < parameters.size(); ++i) {
    std::string module = ModuleOf(graph.tensor(parameters[i]).name);
    if (lora_hosts.count(module)) module += ".base_layer";
    params_of[module].push_back(i);
    path_of.push_back(std::move(module));
  }
  std::vector<std::pair<std::string, Zero3Module>> modules;
  for (int o = 0; o < graph.num_ops(); ++o) {
    std::vector<size_t> read;
    for (TensorId t : graph.op(OpId{o}).inputs)
      if (index_of[t.value] >= 0) read.push_back(static_cast<size_t>(index_of[t.value]));
    if (read.empty()) continue;
    const std::string& path = path_of[read.front()];
    if (!modules.empty() && modules.back().first == path) {  // the same call, one op on
      modules.back().second.last_op = o;
      continue;
    }
    modules.emplace_back(path, Zero3Module{.params = params_of[path], .first_op = o, .last_op = o});
  }
  return modules;
}

// The first input of `op` that is not a parameter (the activation a module reads).
TensorId ActivationInput(const OpNode& op, const std::vector<int32_t>& index_of) {
  for (TensorId t : op.inputs)
    if (index_of[t.value] < 0) return t;
  return TensorId{};
}

}  // namespace

Zero3Layout LayoutZero3(const OpGraph& graph, const TensorStates& states,
                        const std::vector<TensorId>& parameters, const std::vector<int64_t>& bytes,
                        const Parallelism& parallel) {
  Zero3Layout z;
  z.world = parallel.gpus;
  std::vector<int32_t> index_of(graph.num_tensors(), -1);
  bool lora = false;
  int64_t sub_group = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const TensorInfo& info = graph.tensor(parameters[i]);
    index_of[parameters[i].value] = static_cast<int32_t>(i);
    const int64_t numel = info.shape.Numel({});
    const bool trainable = states[parameters[i]].requires_grad;
    z.numel.push_back(numel);
    z.partition_numel.push_back((numel + z.world - 1) / z.world);
    z.element_bytes.push_back(numel > 0 ? bytes[parameters[i].value] / numel : 0);
    z.trainable.push_back(trainable);
    // mark_persistent_parameters (parameter_offload.py): small parameters stay gathered.
    z.persistent.push_back(numel <= parallel.deepspeed.stage3_param_persistence_threshold);
    lora = lora || info.param.lora_adapter;
    if (!trainable) continue;
    z.grad_element_bytes = z.element_bytes.back();
    // _create_fp16_sub_groups: a group closes once its partitions reach sub_group_size.
    sub_group += z.partition_numel.back();
    if (sub_group >= kSubGroupSize) {
      z.sub_group_numel.push_back(sub_group);
      sub_group = 0;
    }
  }
  if (sub_group > 0) z.sub_group_numel.push_back(sub_group);
  // The model's own call; with PEFT, PeftModelForCausalLM's and LoraModel's before it.
  z.root_containers = lora ? 3 : 1;
  auto modules = ModulesInForwardOrder(graph, parameters, index_of);
  std::vector<std::string> open;
  for (auto& [path, m] : modules) {
    m.containers_before_forward = OpenContainers(path, open);
    const OpNode& last = graph.op(OpId{m.last_op});
    m.in_backward = !last.outputs.empty() && states[last.outputs.front()].requires_grad;
    const TensorId input = ActivationInput(graph.op(OpId{m.first_op}), index_of);
    m.post_backward = input.valid() && states[input].requires_grad;
  }
  open.clear();
  for (auto it = modules.rbegin(); it != modules.rend(); ++it)
    if (it->second.in_backward)
      it->second.containers_before_backward = OpenContainers(it->first, open);
  z.module_starting.assign(graph.num_ops(), -1);
  z.module_ending.assign(graph.num_ops(), -1);
  for (auto& [path, m] : modules) {
    z.module_starting[m.first_op] = static_cast<int>(z.modules.size());
    z.module_ending[m.last_op] = static_cast<int>(z.modules.size());
    z.modules.push_back(std::move(m));
  }
  return z;
}

}  // namespace headroom
