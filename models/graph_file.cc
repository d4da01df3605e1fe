#include "models/graph_file.h"

#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/python_json.h"

namespace headroom {
namespace {

using nlohmann::json;

constexpr int kFormatVersion = 2;

// A malformed file: caught at the top and returned with the file's name.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const json& Field(const json& object, const char* key, const std::string& where) {
  if (!object.is_object() || !object.contains(key))
    throw FileError(fmt::format("{}: missing '{}'", where, key));
  return object[key];
}

int64_t IntField(const json& object, const char* key, const std::string& where) {
  const json& v = Field(object, key, where);
  if (!v.is_number_integer())
    throw FileError(fmt::format("{}: '{}' must be an integer", where, key));
  return v.get<int64_t>();
}

std::string StringField(const json& object, const char* key, const std::string& where) {
  const json& v = Field(object, key, where);
  if (!v.is_string()) throw FileError(fmt::format("{}: '{}' must be a string", where, key));
  return v.get<std::string>();
}

int IndexOr(const json& object, const char* key, int fallback) {
  return object.contains(key) && object[key].is_number_integer() ? object[key].get<int>()
                                                                 : fallback;
}

// The value `name` stands for in `table`; an error naming `what` otherwise.
template <typename E, size_t N>
E Named(const std::pair<const char*, E> (&table)[N], const std::string& name, const char* what,
        const std::string& where) {
  for (const auto& [text, value] : table) {
    if (name == text) return value;
  }
  throw FileError(fmt::format("{}: {} '{}' is not one headroom plans", where, what, name));
}

DType DTypeOf(const std::string& name, const std::string& where) {
  static const std::pair<const char*, DType> kNames[] = {
      {"f32", DType::kF32}, {"bf16", DType::kBF16}, {"f16", DType::kF16},
      {"i64", DType::kI64}, {"i32", DType::kI32},   {"bool", DType::kBool},
      {"u8", DType::kU8},   {"c64", DType::kC64},   {"u64", DType::kU64}};
  return Named(kNames, name, "dtype", where);
}

TensorRole RoleOf(const std::string& name, const std::string& where) {
  static const std::pair<const char*, TensorRole> kNames[] = {
      {"input", TensorRole::kInput},
      {"parameter", TensorRole::kParameter},
      {"buffer", TensorRole::kBuffer},
      {"activation", TensorRole::kActivation}};
  return Named(kNames, name, "role", where);
}

OpClass ClassOf(const std::string& name, const std::string& where) {
  static const std::pair<const char*, OpClass> kNames[] = {{"matmul", OpClass::kMatmul},
                                                           {"attention", OpClass::kAttention},
                                                           {"elementwise", OpClass::kElementwise},
                                                           {"layout", OpClass::kLayout},
                                                           {"constant", OpClass::kConstant}};
  return Named(kNames, name, "op class", where);
}

// A dimension's constant, and a tensor's element count at b = s = 1: past these a file
// describes no tensor a step could hold (a step's own bound is checked when it is planned).
constexpr int64_t kMaxDimension = int64_t{1} << 40;
constexpr double kMaxStaticElements = 1.2e15;  // 2^50

// Digits of a small positive number, or nothing.
std::optional<int64_t> SmallNumber(std::string_view digits) {
  if (digits.empty() || digits.size() >= 7 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  return std::stoll(std::string(digits));
}

// "round_up(s,M)" or "chunks(s,M)", each with an optional "+N".
std::optional<Dim> PaddedDim(std::string_view text, std::string_view prefix, Dim::Kind kind) {
  if (!text.starts_with(prefix)) return std::nullopt;
  const size_t close = text.find(')');
  if (close == std::string_view::npos) return std::nullopt;
  const std::optional<int64_t> m = SmallNumber(text.substr(prefix.size(), close - prefix.size()));
  std::string_view rest = text.substr(close + 1);
  std::optional<int64_t> n = 0;
  if (!rest.empty()) n = rest.starts_with('+') ? SmallNumber(rest.substr(1)) : std::nullopt;
  if (!m || *m <= 0 || !n) return std::nullopt;
  return Dim{kind, *m, *n};
}

// "b", "s", "s+N", "round_up(s,M)[+N]", "chunks(s,M)[+N]" or an integer.
Dim DimOf(const json& d, const std::string& where) {
  if (d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() <= kMaxDimension)
    return Dim::C(d.get<int64_t>());
  if (d.is_string()) {
    const std::string text = d.get<std::string>();
    if (text == "b") return Dim::B();
    if (text == "s") return Dim::S();
    if (text.starts_with("s+")) {
      if (auto n = SmallNumber(std::string_view(text).substr(2))) return Dim::SPlus(*n);
    }
    if (auto dim = PaddedDim(text, "round_up(s,", Dim::Kind::kSeqRoundUp)) return *dim;
    if (auto dim = PaddedDim(text, "chunks(s,", Dim::Kind::kSeqChunks)) return *dim;
  }
  throw FileError(fmt::format("{}: bad dimension {}", where, d.dump()));
}

SymShape ShapeOf(const json& dims, const std::string& where) {
  if (!dims.is_array()) throw FileError(where + ": a shape must be a list");
  std::vector<Dim> out;
  for (const json& d : dims) out.push_back(DimOf(d, where));
  SymShape shape(std::move(out));
  if (!(shape.NumelBound({}) <= kMaxStaticElements))
    throw FileError(fmt::format("{}: shape {} is too large", where, dims.dump()));
  return shape;
}

// [[c, i, j], ...]: c * b^i * s^j with i in {0, 1}, j in {0, 1, 2}; a fourth element
// "round_up(s,M)" or "chunks(s,M)" stands in for s.
SymSize SizeOf(const json& terms, const std::string& where) {
  if (!terms.is_array()) throw FileError(where + ": a size must be a list of monomials");
  SymSize out;
  for (const json& t : terms) {
    if (!t.is_array() || (t.size() != 3 && t.size() != 4) || !t[0].is_number() ||
        !t[1].is_number_integer() || !t[2].is_number_integer())
      throw FileError(fmt::format("{}: bad monomial {}", where, t.dump()));
    Dim seq = Dim::S();
    if (t.size() == 4) {
      seq = DimOf(t[3], where);
      if (seq.kind != Dim::Kind::kSeqRoundUp && seq.kind != Dim::Kind::kSeqChunks)
        throw FileError(fmt::format("{}: monomial {} pads s to nothing", where, t.dump()));
    }
    const int b = t[1].get<int>(), s = t[2].get<int>();
    if (!(t[0].get<double>() >= 0 && t[0].get<double>() <= kMaxStaticElements))
      throw FileError(
          fmt::format("{}: monomial {} has a coefficient out of range", where, t.dump()));
    if (b < 0 || b > 1 || s < 0 || s > 2)
      throw FileError(fmt::format("{}: monomial {} is outside b^0..1 s^0..2", where, t.dump()));
    out.terms.push_back({t[0].get<double>(), b, s, seq});
  }
  return out;
}

SectionRef RefOf(const json& r, const std::string& where) {
  if (r.is_array() && r.size() == 1 && r[0] == "input") return {SectionRef::Kind::kInput, 0};
  if (r.is_array() && r.size() == 2 && r[1].is_number_integer() && r[1].get<int>() >= 0) {
    if (r[0] == "local") return {SectionRef::Kind::kLocal, r[1].get<int>()};
    if (r[0] == "shared") return {SectionRef::Kind::kShared, r[1].get<int>()};
  }
  if (r.is_array() && r.size() == 3 && r[0] == "layer" && r[1].is_string() &&
      r[2].is_number_integer() && r[2].get<int>() >= 0)
    return {SectionRef::Kind::kLayer, r[2].get<int>(), r[1].get<std::string>()};
  throw FileError(fmt::format("{}: bad reference {}", where, r.dump()));
}

std::vector<bool> BoolList(const json& object, const char* key, size_t n,
                           const std::string& where) {
  const json& v = Field(object, key, where);
  if (!v.is_array() || v.size() != n)
    throw FileError(fmt::format("{}: '{}' must list {} booleans", where, key, n));
  std::vector<bool> out;
  for (const json& b : v) out.push_back(b.is_boolean() && b.get<bool>());
  return out;
}

TracedGrad GradOf(const json& g, const std::string& where) {
  if (g == "new") return TracedGrad::kNew;
  if (g == "pass") return TracedGrad::kPass;
  if (g == "none") return TracedGrad::kNone;
  throw FileError(fmt::format("{}: bad gradient flow {}", where, g.dump()));
}

ImportedTensor TensorOf(const json& t, const std::string& where) {
  ImportedTensor out;
  out.name = StringField(t, "name", where);
  const std::string at = where + " tensor '" + out.name + "'";
  out.role = RoleOf(StringField(t, "role", at), at);
  out.shape = ShapeOf(Field(t, "shape", at), at);
  out.dtype = DTypeOf(StringField(t, "dtype", at), at);
  out.trainable = t.value("trainable", false);
  out.lora = t.value("lora", false);
  if (t.contains("alias_of") && !t["alias_of"].is_null()) out.alias_of = RefOf(t["alias_of"], at);
  return out;
}

// [heads, kv_heads, head_dim] of a fused attention op: positive, kv_heads dividing heads.
AttentionHeads AttentionHeadsOf(const json& h, const std::string& at) {
  const auto positive = [&](size_t i) {
    if (!h.is_array() || h.size() != 3 || !h[i].is_number_integer() || h[i].get<int64_t>() <= 0 ||
        h[i].get<int64_t>() > kMaxDimension)
      throw FileError(at + ": 'attention_heads' must be three positive sizes");
    return h[i].get<int64_t>();
  };
  AttentionHeads out{.heads = positive(0), .kv_heads = positive(1), .head_dim = positive(2)};
  if (out.heads % out.kv_heads != 0)
    throw FileError(at + ": 'attention_heads': the K/V heads must divide the query heads");
  return out;
}

ImportedOp OpOf(const json& o, const std::string& where) {
  ImportedOp out;
  out.name = StringField(o, "name", where);
  const std::string at = where + " op '" + out.name + "'";
  auto traced = std::make_shared<TracedOp>();
  traced->aten = StringField(o, "aten", at);
  const size_t slash = out.name.rfind('/');
  traced->module = slash == std::string::npos ? "" : out.name.substr(0, slash);
  traced->op_class = ClassOf(StringField(o, "class", at), at);
  for (const json& r : Field(o, "inputs", at)) out.inputs.push_back(RefOf(r, at));
  for (const json& k : Field(o, "outputs", at)) {
    if (!k.is_number_integer()) throw FileError(at + ": outputs must be local indices");
    out.outputs.push_back(k.get<int>());
  }
  if (out.outputs.size() > 32) throw FileError(at + ": more than 32 outputs");
  traced->aliases_input = o.value("aliases_input", false);
  traced->saves_input = BoolList(o, "saves_inputs", out.inputs.size(), at);
  const std::vector<bool> saved_outputs = BoolList(o, "saved_outputs", out.outputs.size(), at);
  for (size_t i = 0; i < saved_outputs.size(); ++i)
    traced->saved_outputs |= saved_outputs[i] ? (1u << i) : 0u;
  for (const json& s : Field(o, "saved_extra", at)) traced->saved_extra.push_back(SizeOf(s, at));
  const json& grads = Field(o, "grads", at);
  if (!grads.is_array() || grads.size() != out.inputs.size())
    throw FileError(at + ": 'grads' must name one flow per input");
  for (const json& g : grads) traced->grads.push_back(GradOf(g, at));
  traced->backward_workspace = SizeOf(Field(o, "backward_workspace", at), at);
  const json& flops = Field(o, "flops", at);
  traced->flops_forward = SizeOf(Field(flops, "forward", at), at);
  traced->flops_backward = SizeOf(Field(flops, "backward", at), at);
  if (o.contains("attention_heads")) traced->attention = AttentionHeadsOf(o["attention_heads"], at);
  out.traced = std::move(traced);
  return out;
}

// The rolled loops of a section: each one's three iterations run the same ops; what the
// section hands on (its output, loss) is not made inside a middle iteration; a hold spans
// one iteration at most.
void CheckLoops(const ImportedSection& s, const std::string& where) {
  int end = 0;
  for (const ImportedLoop& loop : s.loops) {
    if (loop.ops <= 0 || loop.first_op - loop.ops < end ||
        loop.first_op + 2 * loop.ops > int(s.ops.size()) ||
        loop.iterations.kind != Dim::Kind::kSeqChunks || loop.iterations.plus != 0)
      throw FileError(where + ": a loop outside the section's ops, or not one per chunk");
    for (int j = loop.first_op - loop.ops; j < loop.first_op; ++j) {
      for (int k : {j + loop.ops, j + 2 * loop.ops}) {
        if (s.ops[j].name != s.ops[k].name || s.ops[j].traced->aten != s.ops[k].traced->aten)
          throw FileError(fmt::format("{}: op {} of a loop differs between its iterations", where,
                                      s.ops[k].name));
      }
    }
    end = loop.first_op + 2 * loop.ops;
  }
  if (s.loops.empty()) return;
  std::vector<int> made_by(s.tensors.size(), -1);
  for (size_t i = 0; i < s.ops.size(); ++i) {
    for (int k : s.ops[i].outputs) made_by.at(k) = int(i);
  }
  const auto part = [&](int op, const ImportedLoop& loop) {
    return op < loop.first_op - loop.ops || op >= loop.first_op + 2 * loop.ops
               ? -1
               : (op - loop.first_op + loop.ops) / loop.ops;  // 0 first, 1 middle, 2 last
  };
  for (const ImportedLoop& loop : s.loops) {
    for (int k : {s.output, s.loss, s.input_embeddings}) {
      if (k >= 0 && part(made_by[k], loop) == 1)
        throw FileError(where + ": a section's output is made inside a loop");
    }
    for (const auto& [t, until] : s.holds) {
      if (t.kind == SectionRef::Kind::kLocal && part(made_by[t.index], loop) == 0 &&
          part(until, loop) == 2)
        throw FileError(where + ": a hold spans more than one iteration of a loop");
    }
  }
}

ImportedLoop LoopOf(const json& j, const std::string& where) {
  ImportedLoop loop;
  loop.first_op = static_cast<int>(IntField(j, "first_op", where));
  loop.ops = static_cast<int>(IntField(j, "ops", where));
  loop.iterations = DimOf(Field(j, "iterations", where), where);
  return loop;
}

// Every reference points at a tensor that exists when it is read: locals made earlier
// (parameters, inputs and buffers at any point), shared ones of the prologue, in a
// template a tensor of a template (that a layer of that kind ran before is checked when
// the layers are expanded).
void CheckSection(const ImportedSection& s, const std::string& where, size_t shared_tensors,
                  bool has_input, const std::map<std::string, ImportedSection>* templates) {
  const auto layer_tensor = [&](const SectionRef& r) {
    if (!templates) return false;
    const auto it = templates->find(r.layer_kind);
    return it != templates->end() && r.index < int(it->second.tensors.size());
  };
  const auto check = [&](const SectionRef& r, const std::string& what) {
    const bool ok = r.kind == SectionRef::Kind::kLocal    ? r.index < int(s.tensors.size())
                    : r.kind == SectionRef::Kind::kShared ? r.index < int(shared_tensors)
                    : r.kind == SectionRef::Kind::kLayer  ? layer_tensor(r)
                                                          : has_input;
    if (!ok)
      throw FileError(fmt::format("{}: {} refers to a tensor that does not exist", where, what));
  };
  std::vector<bool> made(s.tensors.size(), false);
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    made[k] = s.tensors[k].role != TensorRole::kActivation;
    if (s.tensors[k].alias_of) check(*s.tensors[k].alias_of, "tensor " + s.tensors[k].name);
  }
  for (const ImportedOp& op : s.ops) {
    for (const SectionRef& r : op.inputs) {
      check(r, "op " + op.name);
      if (r.kind == SectionRef::Kind::kLocal && !made[r.index])
        throw FileError(fmt::format("{}: op {} reads a tensor before it is made", where, op.name));
    }
    for (int k : op.outputs) {
      if (k < 0 || k >= int(s.tensors.size()) || made[k])
        throw FileError(fmt::format("{}: op {} makes a bad or second output", where, op.name));
      made[k] = true;
    }
  }
  for (const auto& [t, until] : s.holds) {
    check(t, "a hold");
    if (until < 0 || until >= int(s.ops.size())) throw FileError(where + ": a hold ends at no op");
  }
  for (const SectionRef& t : s.held_until_forward_end) check(t, "a forward-end hold");
  // What a section hands on is an activation one of its ops makes: the simulator counts
  // the uses of activations only, and a layer whose output were a weight is no model.
  for (int k : {s.output, s.loss, s.input_embeddings}) {
    if (k >= int(s.tensors.size())) throw FileError(where + ": an index past the tensors");
    if (k >= 0 && (s.tensors[k].role != TensorRole::kActivation || !made[k]))
      throw FileError(fmt::format("{}: tensor {} is handed on but no op of the section makes it",
                                  where, s.tensors[k].name));
  }
  for (int k : s.kept_by_arguments) {
    if (k < 0 || k >= int(s.tensors.size()) || !made[k] ||
        s.tensors[k].role != TensorRole::kActivation)
      throw FileError(where + ": a tensor kept by the arguments that no op of it makes");
  }
  CheckLoops(s, where);
}

ImportedSection SectionOf(const json& j, const std::string& where) {
  ImportedSection s;
  for (const json& t : Field(j, "tensors", where)) s.tensors.push_back(TensorOf(t, where));
  for (const json& o : Field(j, "ops", where)) s.ops.push_back(OpOf(o, where));
  if (j.contains("loops")) {
    for (const json& l : j["loops"]) s.loops.push_back(LoopOf(l, where));
  }
  s.output = IndexOr(j, "output", -1);
  s.loss = IndexOr(j, "loss", -1);
  s.input_embeddings = IndexOr(j, "input_embeddings", -1);
  if (j.contains("holds")) {
    for (const json& h : j["holds"])
      s.holds.emplace_back(RefOf(Field(h, "tensor", where), where), IntField(h, "until_op", where));
  }
  if (j.contains("held_until_forward_end")) {
    for (const json& r : j["held_until_forward_end"])
      s.held_until_forward_end.push_back(RefOf(r, where));
  }
  if (j.contains("kept_by_arguments")) {
    for (const json& k : j["kept_by_arguments"]) {
      if (!k.is_number_integer()) throw FileError(where + ": kept_by_arguments holds indices");
      s.kept_by_arguments.push_back(k.get<int>());
    }
  }
  return s;
}

ImportedProgram ProgramOf(const json& j, const std::vector<std::string>& layer_types,
                          const std::string& where) {
  ImportedProgram p;
  p.prologue = SectionOf(Field(j, "prologue", where), where + " prologue");
  const json& templates = Field(j, "templates", where);
  if (!templates.is_object()) throw FileError(where + ": 'templates' must be an object");
  for (const auto& [name, section] : templates.items())
    p.templates.emplace(name, SectionOf(section, where + " template '" + name + "'"));
  p.epilogue = SectionOf(Field(j, "epilogue", where), where + " epilogue");
  const size_t shared = p.prologue.tensors.size();
  CheckSection(p.prologue, where + " prologue", 0, false, nullptr);
  for (const auto& [name, section] : p.templates) {
    CheckSection(section, where + " template '" + name + "'", shared, true, &p.templates);
    if (section.output < 0) throw FileError(where + " template '" + name + "': no output");
  }
  CheckSection(p.epilogue, where + " epilogue", shared, true, nullptr);
  if (p.prologue.output < 0) throw FileError(where + " prologue: no output");
  if (p.epilogue.loss < 0) throw FileError(where + " epilogue: no loss");
  for (const std::string& type : layer_types) {
    if (!p.templates.contains(type))
      throw FileError(fmt::format("{}: layer type '{}' has no template", where, type));
  }
  return p;
}

TraceRegime RegimeOf(const json& r, const std::string& where) {
  TraceRegime out;
  out.device = StringField(r, "device", where);
  out.precision = StringField(r, "precision", where);
  out.mode = StringField(r, "mode", where);
  out.attention = StringField(r, "attention", where);
  out.stack = StringField(r, "stack", where);
  const json& kv = Field(r, "kv_cache", where);
  out.kv_cache = kv.is_boolean() && kv.get<bool>();
  if (out.mode == "lora") {
    out.lora_rank = IntField(r, "lora_rank", where);
    for (const json& t : Field(r, "lora_targets", where))
      out.lora_targets.push_back(t.get<std::string>());
  }
  if (r.contains("base_dtype") && r["base_dtype"].is_string()) out.base_dtype = r["base_dtype"];
  out.min_seq_len = r.value("min_seq_len", int64_t{0});
  out.seq_multiple = r.value("seq_multiple", int64_t{0});
  out.images = r.value("images", int64_t{0});
  if (r.contains("kernels")) {
    if (!r["kernels"].is_array()) throw FileError(where + " regime: kernels must be a list");
    std::vector<std::string> packages;
    for (const json& k : r["kernels"]) {
      if (!k.is_string()) throw FileError(where + " regime: kernels holds a non-string");
      packages.push_back(k.get<std::string>());
    }
    Result<std::vector<std::string>> parsed = ParseKernelPackages(std::move(packages));
    if (!parsed) throw FileError(fmt::format("{} regime: {}", where, parsed.error().message));
    out.kernels = std::move(*parsed);
  }
  out.sm = r.value("sm", int64_t{0});
  return out;
}

ImportedGraph GraphOf(const json& root, const std::string& where) {
  if (!root.is_object() || root.value("format", "") != "headroom-graph")
    throw FileError(where + ": not a headroom graph file (format is not \"headroom-graph\")");
  if (IntField(root, "version", where) != kFormatVersion)
    throw FileError(
        fmt::format("{}: graph file version {} (this headroom reads version {}): "
                    "import the model again",
                    where, root["version"].dump(), kFormatVersion));
  ImportedGraph g;
  g.model_type = StringField(root, "model_type", where);
  g.name = root.value("name", g.model_type);
  const json& source = Field(root, "source", where);
  g.transformers_version = source.value("transformers", "");
  g.config_sha256 = source.value("config_sha256", "");
  g.regime = RegimeOf(Field(root, "regime", where), where + " regime");
  const json& config = Field(root, "config", where);
  g.vocab_size = IntField(config, "vocab_size", where);
  g.hidden_size = IntField(config, "hidden_size", where);
  g.num_layers = IntField(config, "num_layers", where);
  g.num_heads = IntField(config, "num_heads", where);
  g.max_positions = IntField(config, "max_positions", where);
  const json& valid = Field(root, "valid_seq_len", where);
  if (!valid.is_array() || valid.size() != 2 || !valid[0].is_number_integer() ||
      !valid[1].is_number_integer())
    throw FileError(where + ": 'valid_seq_len' must be [lo, hi]");
  g.min_seq_len = valid[0].get<int64_t>();
  g.max_seq_len = valid[1].get<int64_t>();
  g.sequence_chunk = root.value("sequence_chunk", int64_t{0});
  if (g.sequence_chunk < 0) throw FileError(where + ": 'sequence_chunk' must not be negative");
  g.layer_prefix = StringField(root, "layer_prefix", where);
  for (const json& t : Field(root, "layer_types", where))
    g.layer_types.push_back(t.get<std::string>());
  if (int64_t(g.layer_types.size()) != g.num_layers)
    throw FileError(
        fmt::format("{}: {} layer types for {} layers", where, g.layer_types.size(), g.num_layers));
  if (root.contains("assumptions")) {
    const json& lines = root["assumptions"];
    if (!lines.is_array()) throw FileError(where + ": 'assumptions' must be a list of strings");
    for (const json& line : lines) {
      if (!line.is_string()) throw FileError(where + ": 'assumptions' must be a list of strings");
      g.assumptions.push_back(line.get<std::string>());
    }
  }
  g.program = ProgramOf(root, g.layer_types, where);
  if (root.contains("micro_batch_1"))
    g.micro_batch_1 = ProgramOf(root["micro_batch_1"], g.layer_types, where + " micro_batch_1");
  return g;
}

}  // namespace

Result<ImportedGraph> ParseImportedGraph(std::string_view text, std::string_view origin) {
  try {
    return GraphOf(ParsePythonJson(text), std::string(origin));
  } catch (const FileError& e) {
    return MakeError(e.what());
  } catch (const json::exception& e) {
    return MakeError(fmt::format("{}: malformed graph file: {}", origin, e.what()));
  }
}

}  // namespace headroom
