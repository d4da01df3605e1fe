#include "planner/report/capacity_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/byte_units.h"
#include "planner/core/text_escape.h"

namespace headroom {
namespace {

std::string Hours(const std::optional<double>& h) {
  if (!h) return "no time";
  return *h < 10 ? fmt::format("{:.1f} h", *h) : fmt::format("{:.0f} h", *h);
}

std::string Usd(const std::optional<double>& usd) {
  if (!usd) return "no price";
  return *usd < 100 ? fmt::format("${:.2f}", *usd) : fmt::format("${:.0f}", *usd);
}

std::string Config(const CapacityRow& r) { return fmt::format("{}x {}", r.gpus, r.gpu); }

std::string Answer(const char* what, const CapacityRow& r) {
  return fmt::format("{}: {}, {}, {}", what, Config(r), Hours(r.known_hours()),
                     Usd(r.known_cost()));
}

// The configuration with the fewest GPUs over every type; the fastest among equals.
std::optional<size_t> Fewest(const CapacityReport& report) {
  std::optional<size_t> best;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CapacityRow& r = report.rows[i];
    if (!r.answer()) continue;
    if (!best || r.gpus < report.rows[*best].gpus ||
        (r.gpus == report.rows[*best].gpus && r.hours < report.rows[*best].hours))
      best = i;
  }
  return best;
}

// A measure as the text table prints it: "-" where the JSON has null (not finite).
std::string FixedOrDash(double v, int decimals) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "-";
}

// The same for CSV: an empty field.
std::string FixedOrEmpty(double v, int decimals) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "";
}

nlohmann::json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

const char* BasisName(PriceBasis b) { return b == PriceBasis::kCloud ? "cloud" : "owned"; }

nlohmann::json InterconnectJson(const CapacityRow& r) {
  const std::optional<Interconnect> i = InterconnectOf(r);
  if (!i) return nullptr;
  return {{"nodes", i->nodes},
          {"gpus_per_node", i->gpus_per_node},
          {"link_gbps", i->link_gbps},
          {"network_gbps", i->network_gbps ? nlohmann::json(*i->network_gbps) : nullptr}};
}

nlohmann::json PlanJsonOf(const CapacityRow& r) {
  const TrainingConfig& c = r.plan.config;
  return {{"sharding", std::string(ShardingName(c.parallel.sharding))},
          {"interconnect", InterconnectJson(r)},
          {"micro_batch", c.micro_batch},
          {"grad_accum", c.grad_accum_steps},
          {"global_batch", r.plan.global_batch},
          {"precision", std::string(PrecisionName(c.precision))},
          {"checkpointed_blocks", r.plan.num_checkpointed()},
          {"blocks", r.plan.num_blocks()},
          {"checkpoint", c.checkpoint.ToString()}};
}

nlohmann::json RowJson(const CapacityRow& r) {
  nlohmann::json j = {{"gpu", r.gpu},
                      {"gpus", r.gpus},
                      {"fits", r.fits},
                      {"within_limits", r.within_limits},
                      {"usable_bytes", r.usable_bytes}};
  for (const char* key : {"tokens_per_second", "hours", "cost_usd"}) j[key] = nullptr;
  if (!r.solved) {
    j["plan"] = nullptr;
    j["peak_device_bytes"] = nullptr;
    j["why"] = "the model state alone exceeds a GPU's memory at this count";
    return j;
  }
  j["plan"] = PlanJsonOf(r);
  j["peak_device_bytes"] = r.peak_device_bytes;
  j["peak_allocated_bytes"] = r.peak_allocated_bytes;
  nlohmann::json by_category;
  for (int c = 0; c < kNumCategories; ++c)
    by_category[std::string(CategoryName(static_cast<Category>(c)))] = r.breakdown[c];
  j["peak_by_category"] = by_category;
  if (!r.fits) {
    j["shortfall_bytes"] = r.shortfall_bytes;
    return j;
  }
  j["step_seconds"] = r.time.step_seconds;
  j["tokens_per_second"] = r.time.tokens_per_second;
  j["tokens_per_second_per_gpu"] = r.time.tokens_per_second_per_gpu;
  j["mfu"] = r.time.mfu;
  j["hours"] = OrNull(r.known_hours());
  j["cost_usd"] = OrNull(r.known_cost());
  if (!r.known_hours()) j["why"] = "the time estimate is not a positive, finite number of hours";
  if (!r.batch_note.empty()) j["batch_note"] = r.batch_note;
  return j;
}

nlohmann::json RowRef(const CapacityReport& report, const std::optional<size_t>& i) {
  if (!i) return nullptr;
  const CapacityRow& r = report.rows[*i];
  return {{"gpu", r.gpu},
          {"gpus", r.gpus},
          {"hours", OrNull(r.known_hours())},
          {"cost_usd", OrNull(r.known_cost())}};
}

nlohmann::json PricesJson(const CapacityReport& report, const PriceCatalog& prices) {
  nlohmann::json used = nlohmann::json::object();
  for (const std::string& gpu : GpuTypesOf(report)) {
    const PriceQuote* q = prices.QuoteFor(gpu, report.job.basis);
    if (!q) continue;
    used[gpu] = {{"usd_per_gpu_hour", *prices.UsdPerGpuHour(gpu, report.job.basis)},
                 {"quoted_usd", q->usd},
                 {"provider", q->provider},
                 {"source", q->source},
                 {"date", q->date}};
  }
  return used;
}

}  // namespace

std::vector<std::string> GpuTypesOf(const CapacityReport& report) {
  std::vector<std::string> types;
  for (const CapacityRow& r : report.rows)
    if (std::find(types.begin(), types.end(), r.gpu) == types.end()) types.push_back(r.gpu);
  return types;
}

std::optional<Interconnect> InterconnectOf(const CapacityRow& r) {
  const Parallelism& p = r.plan.config.parallel;
  if (p.gpus <= 1) return std::nullopt;
  const Result<DeviceSpec> device = FindGpu(r.gpu);
  if (!device.ok()) return std::nullopt;
  Interconnect out{
      .nodes = p.nodes, .gpus_per_node = p.gpus_per_node(), .link_gbps = device->link_gbps};
  if (p.nodes > 1) out.network_gbps = device->network_gbps;
  return out;
}

std::string InterconnectText(const Interconnect& i) {
  return i.network_gbps ? fmt::format("{}x{} @ {:g}/{:g} GB/s", i.nodes, i.gpus_per_node,
                                      i.link_gbps, *i.network_gbps)
                        : fmt::format("{}x{} @ {:g} GB/s", i.nodes, i.gpus_per_node, i.link_gbps);
}

std::string PlanSummary(const CapacityRow& r) {
  const TrainingConfig& c = r.plan.config;
  const std::optional<Interconnect> links = InterconnectOf(r);
  return fmt::format("{}{}, mb {} x {}, {}, ckpt {}/{}", ShardingName(c.parallel.sharding),
                     links ? ", " + InterconnectText(*links) : "", c.micro_batch,
                     c.grad_accum_steps, PrecisionName(c.precision), r.plan.num_checkpointed(),
                     r.plan.num_blocks());
}

std::string CapacityHeadline(const CapacityReport& report) {
  std::vector<std::string> parts;
  if (report.cheapest) parts.push_back(Answer("cheapest", report.rows[*report.cheapest]));
  if (report.fastest) parts.push_back(Answer("fastest", report.rows[*report.fastest]));
  if (auto fewest = Fewest(report))
    parts.push_back(fmt::format("fewest: {}", Config(report.rows[*fewest])));
  if (parts.empty()) {
    return report.min_gpus.empty() ? "no configuration fits: try fewer tokens per sequence, LoRA "
                                     "or QLoRA, or more GPUs "
                                     "(--max-gpus)"
                                   : "configurations fit, but none within --max-hours / --max-cost";
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string PriceBasisText(const CapacityReport& report, const PriceCatalog& prices) {
  std::string out = fmt::format("prices: {} ({}), as of {}", TerminalEscaped(prices.origin),
                                BasisName(report.job.basis), prices.as_of);
  if (report.job.basis == PriceBasis::kOwned)
    out += fmt::format("; purchase price over {:g} years at {:.0f}% utilization",
                       prices.lifetime_years, 100 * prices.utilization);
  for (const std::string& gpu : GpuTypesOf(report)) {
    const PriceQuote* q = prices.QuoteFor(gpu, report.job.basis);
    if (!q) continue;
    out +=
        fmt::format("\n  {:<10} ${:.2f}/GPU-h  {} ({}, {})", gpu,
                    *prices.UsdPerGpuHour(gpu, report.job.basis), q->provider, q->source, q->date);
  }
  return out;
}

std::string FormatCapacityText(const CapacitySubject& subject, const CapacityReport& report,
                               const PriceCatalog& prices) {
  std::string out =
      fmt::format("{}\n\n{}: {}, {:.3g} tokens\n\n", CapacityHeadline(report),
                  TerminalEscaped(subject.model), subject.training, report.job.tokens);
  out +=
      fmt::format("{:<11} {:>5}  {:<6} {:>10} {:>9} {:>7} {:>5} {:>9} {:>10}  {}\n", "gpu", "count",
                  "fits", "peak/GPU", "tokens/s", "step s", "MFU", "hours", "cost", "plan");
  for (const CapacityRow& r : report.rows) {
    if (!r.fits) {
      out += fmt::format("{:<11} {:>5}  {:<6} {:>10}\n", r.gpu, r.gpus, "no",
                         r.solved ? FormatBytes(r.peak_device_bytes) : "-");
      continue;
    }
    out += fmt::format("{:<11} {:>5}  {:<6} {:>10} {:>9} {:>7} {:>4}% {:>9} {:>10}  {}\n", r.gpu,
                       r.gpus, r.within_limits ? "yes" : "limit", FormatBytes(r.peak_device_bytes),
                       FixedOrDash(r.time.tokens_per_second, 0),
                       FixedOrDash(r.time.step_seconds, 2), FixedOrDash(100 * r.time.mfu, 0),
                       Hours(r.known_hours()), Usd(r.known_cost()), PlanSummary(r));
  }
  out +=
      "\nplan: NODESxGPUS @ GB/s per GPU and direction within a node (/ between nodes), "
      "as the step time assumes them\n";
  out += "\nfewest GPUs per type:";
  for (const auto& [gpu, n] : report.min_gpus) out += fmt::format(" {} {};", gpu, n);
  out += "\nlimits at the fewest GPUs (every block checkpointed):\n";
  for (const GpuLimits& l : report.limits) {
    out += fmt::format(
        "  {:<11} {}x: longest sequence {}{} at micro-batch 1; largest micro-batch "
        "{}\n",
        l.gpu, l.gpus, l.longest_seq_len, l.seq_len_capped ? " (the model's limit)" : "",
        l.largest_micro_batch);
  }
  out += fmt::format("\n{}\n", PriceBasisText(report, prices));
  for (const std::string& note : report.notes) out += "note: " + note + "\n";
  return out;
}

nlohmann::json CapacityJson(const CapacitySubject& subject, const CapacityReport& report,
                            const PriceCatalog& prices) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CapacityRow& r : report.rows) rows.push_back(RowJson(r));
  nlohmann::json pareto = nlohmann::json::array();
  for (size_t i : report.pareto) pareto.push_back(RowRef(report, i));
  nlohmann::json limits = nlohmann::json::array();
  for (const GpuLimits& l : report.limits)
    limits.push_back({{"gpu", l.gpu},
                      {"gpus", l.gpus},
                      {"longest_seq_len", l.longest_seq_len},
                      {"seq_len_capped_by_model", l.seq_len_capped},
                      {"largest_micro_batch", l.largest_micro_batch}});
  return {{"model", subject.model},
          {"training", subject.training},
          {"tokens", report.job.tokens},
          {"headline", CapacityHeadline(report)},
          {"configurations", rows},
          {"min_gpus", report.min_gpus},
          {"cheapest", RowRef(report, report.cheapest)},
          {"fastest", RowRef(report, report.fastest)},
          {"fewest", RowRef(report, Fewest(report))},
          {"pareto", pareto},
          {"limits", limits},
          {"price_basis", BasisName(report.job.basis)},
          {"prices_date", prices.as_of},
          {"prices_origin", prices.origin},
          {"prices", PricesJson(report, prices)},
          {"notes", report.notes}};
}

std::string CapacityCsv(const CapacityReport& report) {
  std::string out =
      "gpu,gpus,fits,within_limits,sharding,micro_batch,grad_accum,precision,checkpointed_blocks,"
      "peak_device_bytes,tokens_per_second,step_seconds,mfu,hours,cost_usd,nodes,gpus_per_node,"
      "link_gbps,network_gbps\n";
  for (const CapacityRow& r : report.rows) {
    out += fmt::format("{},{},{},{}", CsvField(r.gpu), r.gpus, r.fits, r.within_limits);
    if (!r.fits) {
      out +=
          fmt::format(",,,,,,{},,,,,,,,,\n", r.solved ? std::to_string(r.peak_device_bytes) : "");
      continue;
    }
    const TrainingConfig& c = r.plan.config;
    const std::optional<double> hours = r.known_hours(), cost = r.known_cost();
    const std::optional<Interconnect> links = InterconnectOf(r);
    out += fmt::format(
        ",{},{},{},{},{},{},{},{},{},{},{},{}\n", CsvField(ShardingName(c.parallel.sharding)),
        c.micro_batch, c.grad_accum_steps, CsvField(PrecisionName(c.precision)),
        r.plan.num_checkpointed(), r.peak_device_bytes, FixedOrEmpty(r.time.tokens_per_second, 1),
        FixedOrEmpty(r.time.step_seconds, 4), FixedOrEmpty(r.time.mfu, 4),
        hours ? fmt::format("{:.4f}", *hours) : "", cost ? fmt::format("{:.2f}", *cost) : "",
        links ? fmt::format("{},{},{:g},{}", links->nodes, links->gpus_per_node, links->link_gbps,
                            links->network_gbps ? fmt::format("{:g}", *links->network_gbps) : "")
              : ",,,");
  }
  return out;
}

}  // namespace headroom
