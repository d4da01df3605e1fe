#include "planner/plan/plan_file.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "planner/core/file_io.h"
#include "planner/core/limits.h"
#include "planner/core/text_escape.h"

namespace headroom {
namespace {

// A mixture of experts' fields, only for one, so the dense models' plan files are unchanged.
void EmitExperts(YAML::Emitter& out, const ModelSpec& m) {
  if (!m.is_moe()) return;
  out << YAML::Key << "num_experts" << YAML::Value << m.num_experts;
  out << YAML::Key << "num_experts_per_tok" << YAML::Value << m.num_experts_per_tok;
  out << YAML::Key << "moe_intermediate_size" << YAML::Value << m.moe_intermediate_size;
  out << YAML::Key << "norm_topk_prob" << YAML::Value << m.norm_topk_prob;
}

void EmitModel(YAML::Emitter& out, const ModelSpec& m) {
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << m.name;
  out << YAML::Key << "family" << YAML::Value << std::string(FamilyName(m.family));
  for (auto [key, value] : {std::pair{"vocab_size", m.vocab_size},
                            {"hidden_size", m.hidden_size},
                            {"num_layers", m.num_layers},
                            {"num_heads", m.num_heads},
                            {"num_kv_heads", m.num_kv_heads},
                            {"head_dim", m.head_dim},
                            {"intermediate_size", m.intermediate_size},
                            {"max_positions", m.max_positions}}) {
    out << YAML::Key << key << YAML::Value << value;
  }
  if (m.sliding_window > 0) out << YAML::Key << "sliding_window" << YAML::Value << m.sliding_window;
  out << YAML::Key << "tie_embeddings" << YAML::Value << m.tie_embeddings;
  out << YAML::Key << "qkv_bias" << YAML::Value << m.qkv_bias;
  out << YAML::Key << "norm_eps" << YAML::Value << m.norm_eps;
  out << YAML::Key << "activation" << YAML::Value << m.activation;
  if (IsLlamaLike(m.family)) {
    out << YAML::Key << "rope_theta" << YAML::Value << m.rope.theta;
    if (m.rope.llama3_factor > 0) {
      out << YAML::Key << "rope_scaling" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "type" << YAML::Value << "llama3";
      out << YAML::Key << "factor" << YAML::Value << m.rope.llama3_factor;
      out << YAML::Key << "low_freq_factor" << YAML::Value << m.rope.low_freq_factor;
      out << YAML::Key << "high_freq_factor" << YAML::Value << m.rope.high_freq_factor;
      out << YAML::Key << "original_max_positions" << YAML::Value << m.rope.original_max_positions;
      out << YAML::EndMap;
    }
    if (m.rope.linear_factor > 0) {
      out << YAML::Key << "rope_scaling" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "type" << YAML::Value << "linear";
      out << YAML::Key << "factor" << YAML::Value << m.rope.linear_factor << YAML::EndMap;
    }
    // Gemma's fields, only where set, so the other families' plan files are unchanged.
    if (m.sliding_window_pattern > 0)
      out << YAML::Key << "sliding_window_pattern" << YAML::Value << m.sliding_window_pattern;
    for (auto [key, value] : {std::pair{"query_pre_attn_scalar", m.query_pre_attn_scalar},
                              {"attn_logit_softcapping", m.attn_logit_softcap},
                              {"final_logit_softcapping", m.final_logit_softcap},
                              {"rope_local_theta", m.rope_local_theta}}) {
      if (value > 0) out << YAML::Key << key << YAML::Value << value;
    }
    EmitExperts(out, m);
  }
  out << YAML::Key << "hidden_dropout" << YAML::Value << m.hidden_dropout;
  out << YAML::Key << "attention_dropout" << YAML::Value << m.attention_dropout;
  if (m.family == ModelFamily::kBert) {
    out << YAML::Key << "type_vocab_size" << YAML::Value << m.type_vocab_size;
    out << YAML::Key << "num_labels" << YAML::Value << m.num_labels;
  }
  out << YAML::EndMap;
}

// The ranks and how they split the model, for a plan over more than one.
void WriteParallelism(YAML::Emitter& out, const Parallelism& p) {
  out << YAML::Key << "gpus" << YAML::Value << p.gpus;
  out << YAML::Key << "nodes" << YAML::Value << p.nodes;
  out << YAML::Key << "sharding" << YAML::Value << std::string(ShardingName(p.sharding));
  out << YAML::Key << "ddp_bucket_view" << YAML::Value << p.ddp_bucket_view;
  out << YAML::Key << "offload" << YAML::Value << std::string(OffloadName(p.offload));
  if (p.fsdp())
    out << YAML::Key << "fsdp_wrap" << YAML::Value
        << std::string(NameIn(kFsdpWrapNames, p.fsdp_wrap));
  if (p.fsdp_param_dtype)
    out << YAML::Key << "fsdp_param_dtype" << YAML::Value
        << std::string(DTypeName(*p.fsdp_param_dtype));
  if (p.fsdp_reduce_dtype)
    out << YAML::Key << "fsdp_reduce_dtype" << YAML::Value
        << std::string(DTypeName(*p.fsdp_reduce_dtype));
  if (p.deepspeed_zero()) {
    const DeepSpeedZeroKnobs& ds = p.deepspeed;
    out << YAML::Key << "deepspeed" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "reduce_bucket_size" << YAML::Value << ds.reduce_bucket_size;
    out << YAML::Key << "allgather_bucket_size" << YAML::Value << ds.allgather_bucket_size;
    out << YAML::Key << "overlap_comm" << YAML::Value << p.overlap_comm();
    out << YAML::EndMap;
  }
}

}  // namespace

std::string WritePlanYaml(const PlanFile& p) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << YAML::Comment("headroom plan: inputs, decisions, predicted memory and time")
      << YAML::BeginMap;
  out << YAML::Key << "headroom_plan_version" << YAML::Value << kPlanFormatVersion;
  out << YAML::Key << "model" << YAML::Value;
  EmitModel(out, p.model);
  out << YAML::Key << "device" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << p.device;
  out << YAML::Key << "memory_bytes" << YAML::Value << p.device_memory_bytes << YAML::EndMap;
  const TrainingConfig& c = p.config;
  out << YAML::Key << "training" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "global_batch" << YAML::Value << p.global_batch;
  out << YAML::Key << "micro_batch" << YAML::Value << c.micro_batch;
  out << YAML::Key << "grad_accum_steps" << YAML::Value << c.grad_accum_steps;
  out << YAML::Key << "seq_len" << YAML::Value << c.seq_len;
  out << YAML::Key << "precision" << YAML::Value << std::string(PrecisionName(c.precision));
  out << YAML::Key << "optimizer" << YAML::Value << std::string(OptimizerName(c.optimizer));
  out << YAML::Key << "attention" << YAML::Value << std::string(AttentionName(c.attention));
  out << YAML::Key << "checkpoint" << YAML::Value << c.checkpoint.ToString();
  out << YAML::Key << "stack" << YAML::Value << std::string(StackName(c.stack));
  if (c.optimizer_impl)
    out << YAML::Key << "optimizer_impl" << YAML::Value
        << std::string(OptimizerImplName(*c.optimizer_impl));
  if (c.base_dtype)
    out << YAML::Key << "base_dtype" << YAML::Value << std::string(DTypeName(*c.base_dtype));
  if (c.moe_routing)
    out << YAML::Key << "moe_routing" << YAML::Value << std::string(MoeRoutingName(*c.moe_routing));
  if (c.images_per_sample > 0)
    out << YAML::Key << "images_per_sample" << YAML::Value << c.images_per_sample;
  if (!c.kernel_packages.empty())
    out << YAML::Key << "kernel_packages" << YAML::Value << YAML::Flow << c.kernel_packages;
  if (c.loss.chunked()) out << YAML::Key << "loss" << YAML::Value << c.loss.ToString();
  if (c.activation_offload) out << YAML::Key << "activation_offload" << YAML::Value << true;
  if (c.packing != Packing::kPadded)
    out << YAML::Key << "packing" << YAML::Value << std::string(PackingName(c.packing));
  if (c.parallel.distributed()) WriteParallelism(out, c.parallel);
  out << YAML::Key << "fine_tune" << YAML::Value << std::string(FineTuneName(c.fine_tune.mode));
  out << YAML::Key << "lora_rank" << YAML::Value << c.fine_tune.lora_rank;
  out << YAML::Key << "lora_alpha" << YAML::Value << c.fine_tune.lora_alpha;
  out << YAML::Key << "lora_dropout" << YAML::Value << c.fine_tune.lora_dropout;
  out << YAML::Key << "lora_targets" << YAML::Value << YAML::Flow << c.fine_tune.lora_targets;
  out << YAML::Key << "margin" << YAML::Value << p.margin;
  out << YAML::EndMap;
  out << YAML::Key << "predicted" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "fits" << YAML::Value << p.fits;
  out << YAML::Key << "allocated_bytes" << YAML::Value << p.allocated_bytes;
  out << YAML::Key << "reserved_bytes" << YAML::Value << p.reserved_bytes;
  out << YAML::Key << "device_bytes" << YAML::Value << p.device_bytes;
  out << YAML::Key << "peak_phase" << YAML::Value << p.peak_phase;
  out << YAML::Key << "breakdown_bytes" << YAML::Value << p.breakdown_bytes;
  out << YAML::Key << "step_seconds" << YAML::Value << p.step_seconds;
  out << YAML::Key << "tokens_per_second" << YAML::Value << p.tokens_per_second;
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// Reads the sections of a plan file, naming the field being read when one is missing
// or mistyped (YAML::Exception) or holds a value its parser rejects (BadValue).
class PlanReader {
 public:
  struct BadValue {
    std::string message;
  };

  const std::string& field() const { return field_; }

  YAML::Node Need(const YAML::Node& parent, const char* key) {
    field_ = key;
    if (!parent[key])
      throw YAML::Exception(YAML::Mark::null_mark(), std::string("missing field '") + key + "'");
    return parent[key];
  }
  template <typename T>
  T Take(Result<T> value) {
    if (!value) throw BadValue{value.error().message};
    return *value;
  }

  // The fields a plan file may leave out, each with its default when absent.
  void ReadOptionalTraining(const YAML::Node& t, TrainingConfig& c) {
    if (t["optimizer_impl"])
      c.optimizer_impl = Take(ParseOptimizerImpl(t["optimizer_impl"].as<std::string>()));
    if (t["base_dtype"]) {
      c.base_dtype = ParseDType(t["base_dtype"].as<std::string>());
      if (!c.base_dtype) throw BadValue{"base_dtype must be fp32, bf16 or fp16"};
    }
    if (t["moe_routing"]) c.moe_routing = Take(ParseMoeRouting(t["moe_routing"].as<std::string>()));
    if (t["images_per_sample"]) c.images_per_sample = t["images_per_sample"].as<int64_t>();
    if (t["kernel_packages"]) {
      c.kernel_packages =
          Take(ParseKernelPackages(t["kernel_packages"].as<std::vector<std::string>>()));
    }
    if (t["loss"]) c.loss = Take(LossConfig::Parse(t["loss"].as<std::string>()));  // else full
    if (t["activation_offload"]) c.activation_offload = t["activation_offload"].as<bool>();
    if (t["packing"])  // padded when absent
      c.packing = Take(ParseIn(kPackingNames, t["packing"].as<std::string>(), "packing"));
  }

  void ReadTraining(const YAML::Node& t, PlanFile& p) {
    TrainingConfig& c = p.config;
    p.global_batch = Need(t, "global_batch").as<int64_t>();
    c.micro_batch = Need(t, "micro_batch").as<int64_t>();
    c.grad_accum_steps = Need(t, "grad_accum_steps").as<int64_t>();
    c.seq_len = Need(t, "seq_len").as<int64_t>();
    c.precision = Take(ParsePrecision(Need(t, "precision").as<std::string>()));
    c.optimizer = Take(ParseOptimizer(Need(t, "optimizer").as<std::string>()));
    c.attention = Take(ParseAttention(Need(t, "attention").as<std::string>()));
    c.checkpoint = Take(CheckpointPolicy::Parse(Need(t, "checkpoint").as<std::string>()));
    // Plan files written before stacks were recorded describe headroom's own runtime.
    c.stack = t["stack"] ? Take(ParseStack(t["stack"].as<std::string>())) : Stack::kHeadroom;
    ReadOptionalTraining(t, c);
    if (t["sharding"]) {  // one rank when absent
      c.parallel.sharding = Take(ParseSharding(t["sharding"].as<std::string>()));
      c.parallel.gpus = Need(t, "gpus").as<int64_t>();
      c.parallel.nodes = Need(t, "nodes").as<int64_t>();
      c.parallel.ddp_bucket_view = Need(t, "ddp_bucket_view").as<bool>();
      if (t["offload"])  // none when absent (plan files written before offloading)
        c.parallel.offload = Take(ParseOffload(t["offload"].as<std::string>()));
      if (t["fsdp_wrap"])  // blocks when absent
        c.parallel.fsdp_wrap =
            Take(ParseIn(kFsdpWrapNames, t["fsdp_wrap"].as<std::string>(), "fsdp_wrap"));
      for (auto [key, field] : {std::pair{"fsdp_param_dtype", &Parallelism::fsdp_param_dtype},
                                {"fsdp_reduce_dtype", &Parallelism::fsdp_reduce_dtype}}) {
        if (!t[key]) continue;  // no policy given
        const std::optional<DType> dtype = ParseDType(t[key].as<std::string>());
        if (!dtype) throw BadValue{fmt::format("{}: not a dtype", key)};
        c.parallel.*field = dtype;
      }
      if (const YAML::Node ds = t["deepspeed"]) {
        c.parallel.deepspeed.reduce_bucket_size = Need(ds, "reduce_bucket_size").as<int64_t>();
        c.parallel.deepspeed.allgather_bucket_size =
            Need(ds, "allgather_bucket_size").as<int64_t>();
        c.parallel.deepspeed.overlap_comm = Need(ds, "overlap_comm").as<bool>();
      }
      if (auto error = ValidateParallelism(c.parallel)) throw BadValue{error->message};
    }
    c.fine_tune.mode =
        Take(ParseIn(kFineTuneNames, Need(t, "fine_tune").as<std::string>(), "fine_tune"));
    c.fine_tune.lora_rank = Need(t, "lora_rank").as<int64_t>();
    c.fine_tune.lora_alpha = Need(t, "lora_alpha").as<double>();
    c.fine_tune.lora_dropout = Need(t, "lora_dropout").as<double>();
    c.fine_tune.lora_targets = Need(t, "lora_targets").as<std::vector<std::string>>();
    p.margin = Need(t, "margin").as<double>();
  }

  void ReadPredicted(const YAML::Node& pred, PlanFile& p) {
    p.fits = Need(pred, "fits").as<bool>();
    p.allocated_bytes = Need(pred, "allocated_bytes").as<int64_t>();
    p.reserved_bytes = Need(pred, "reserved_bytes").as<int64_t>();
    p.device_bytes = Need(pred, "device_bytes").as<int64_t>();
    p.peak_phase = Need(pred, "peak_phase").as<std::string>();
    p.breakdown_bytes = Need(pred, "breakdown_bytes").as<std::map<std::string, int64_t>>();
    p.step_seconds = Need(pred, "step_seconds").as<double>();
    p.tokens_per_second = Need(pred, "tokens_per_second").as<double>();
  }

 private:
  std::string field_;
};

// The sizes and numbers a plan file may hold; the request-level checks come later.
std::optional<Error> CheckPlanValues(const PlanFile& p) {
  using namespace limits;
  const TrainingConfig& c = p.config;
  for (auto [value, hi, field] :
       {std::tuple{c.micro_batch, kMaxBatch, "micro_batch"},
        {c.grad_accum_steps, kMaxBatch, "grad_accum_steps"},
        {p.global_batch, kMaxBatch, "global_batch"},
        {c.seq_len, kMaxPositions, "seq_len"},
        {p.device_memory_bytes, std::numeric_limits<int64_t>::max(), "device.memory_bytes"}}) {
    if (auto error = CheckRange(value, 1, hi, field)) return error;
  }
  if (auto error = CheckRange(c.fine_tune.lora_rank, 0, kMaxLoraRank, "lora_rank")) return error;
  if (auto error = CheckRange(c.images_per_sample, 0, kMaxImagesPerSample, "images_per_sample"))
    return error;
  for (auto [value, field] : {std::pair{c.fine_tune.lora_alpha, "lora_alpha"},
                              {c.fine_tune.lora_dropout, "lora_dropout"},
                              {p.margin, "margin"},
                              {p.step_seconds, "step_seconds"},
                              {p.tokens_per_second, "tokens_per_second"}}) {
    if (!std::isfinite(value)) return MakeError(fmt::format("{} must be a finite number", field));
  }
  return std::nullopt;
}

Result<YAML::Node> LoadPlanRoot(std::string_view text, std::string_view origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return MakeError(fmt::format("{}: not a valid plan file (malformed YAML at line {}: {})",
                                 origin, e.mark.line + 1, e.msg));
  }
  if (!root.IsMap() || !root["headroom_plan_version"]) {
    return MakeError(
        fmt::format("{}: not a headroom plan file (no headroom_plan_version)", origin));
  }
  return root;
}

}  // namespace

Result<PlanFile> ParsePlanYaml(std::string_view text, std::string_view origin) {
  // Names and phases are written back as read: bytes that are not UTF-8 would come back
  // escaped, another plan (found by fuzz/plan_file_fuzzer.cc).
  if (!IsUtf8(text)) return MakeError(fmt::format("{}: not UTF-8 text", origin));
  if (const std::optional<size_t> at = FirstNonPrintableByte(text)) {
    const auto line = std::count(text.begin(), text.begin() + *at, '\n') + 1;
    return MakeError(
        fmt::format("{}:{}: a control character (byte 0x{:02x}) that YAML does not "
                    "allow",
                    origin, line, static_cast<unsigned char>(text[*at])));
  }
  Result<YAML::Node> root = LoadPlanRoot(text, origin);
  if (!root) return root.error();
  PlanFile p;
  PlanReader reader;
  try {
    const int version = reader.Need(*root, "headroom_plan_version").as<int>();
    if (version > kPlanFormatVersion) {
      return MakeError(fmt::format(
          "{}: written by a newer headroom (plan format {}); this version reads format {}. "
          "Upgrade headroom or re-plan.",
          origin, version, kPlanFormatVersion));
    }
    YAML::Emitter model_text;
    model_text << reader.Need(*root, "model");
    auto model = ParseModelSpecYaml(model_text.c_str(), origin);
    if (!model) return model.error();
    p.model = *model;
    const YAML::Node device = reader.Need(*root, "device");
    p.device = reader.Need(device, "name").as<std::string>();
    p.device_memory_bytes = reader.Need(device, "memory_bytes").as<int64_t>();
    reader.ReadTraining(reader.Need(*root, "training"), p);
    reader.ReadPredicted(reader.Need(*root, "predicted"), p);
  } catch (const YAML::Exception& e) {
    return MakeError(
        fmt::format("{}: corrupted plan file at '{}': {}", origin, reader.field(), e.msg));
  } catch (const PlanReader::BadValue& e) {
    return MakeError(fmt::format("{}: {}", origin, e.message));
  }
  if (auto error = CheckPlanValues(p))
    return MakeError(fmt::format("{}: {}", origin, error->message));
  return p;
}

Result<PlanRequest> ReadPlanRequest(const std::string& path) {
  Result<std::string> text = ReadRegularFile(path);
  if (!text) return MakeError("--plan: " + text.error().message);
  Result<PlanFile> plan = ParsePlanYaml(*text, path);
  if (!plan) return plan.error();
  PlanRequest r{.model = plan->model, .config = plan->config, .device = {}};
  if (plan->device == "cpu") {
    r.device = CpuDevice(plan->device_memory_bytes);
  } else if (Result<DeviceSpec> gpu = FindGpu(plan->device)) {
    r.device = *gpu;
  } else {
    r.device = CustomGpu(plan->device_memory_bytes);
  }
  return r;
}

}  // namespace headroom
