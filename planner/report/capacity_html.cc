#include "planner/report/capacity_html.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "planner/core/byte_units.h"
#include "planner/core/gpu_catalog.h"

namespace headroom {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                                    "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"};
constexpr const char* kCategoryColors[] = {"#4e79a7", "#a0cbe8", "#f28e2b",
                                           "#e15759", "#59a14f", "#edc948"};

std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ColorOf(const std::vector<std::string>& types, const std::string& gpu) {
  const size_t i = std::find(types.begin(), types.end(), gpu) - types.begin();
  return kPalette[i % std::size(kPalette)];
}

// A log-scaled axis over [lo, hi], widened to whole 1-2-5 steps.
struct LogAxis {
  double lo, hi;
  double pixel_lo, pixel_hi;
  double At(double v) const {
    return pixel_lo + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) *
                          (pixel_hi - pixel_lo);
  }
  std::vector<double> Ticks() const {
    std::vector<double> out;
    for (double decade = std::pow(10, std::floor(std::log10(lo))); decade <= hi; decade *= 10)
      for (double m : {1.0, 2.0, 5.0})
        if (m * decade >= lo && m * decade <= hi) out.push_back(m * decade);
    return out;
  }
};

LogAxis AxisOver(std::vector<double> values, double pixel_lo, double pixel_hi) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return {*lo / 1.5, *hi * 1.5, pixel_lo, pixel_hi};
}

std::string ScatterAxes(const LogAxis& x, const LogAxis& y, const char* x_unit) {
  std::string svg;
  for (double t : x.Ticks())
    svg += fmt::format(
        R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" y2="{2:.1f}" stroke="#ddd"/><text x="{0:.1f}" y="{3:.1f}" text-anchor="middle">{4:g}{5}</text>)",
        x.At(t), y.pixel_lo, y.pixel_hi, y.pixel_lo + 16, t, x_unit);
  for (double t : y.Ticks())
    svg += fmt::format(
        R"(<line x1="{0:.1f}" x2="{1:.1f}" y1="{2:.1f}" y2="{2:.1f}" stroke="#ddd"/><text x="{3:.1f}" y="{4:.1f}" text-anchor="end">${5:g}</text>)",
        x.pixel_lo, x.pixel_hi, y.At(t), x.pixel_lo - 6, y.At(t) + 4, t);
  svg += fmt::format(
      R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">wall-clock hours for the job</text>)",
      (x.pixel_lo + x.pixel_hi) / 2, y.pixel_lo + 36);
  svg += fmt::format(
      R"svg(<text x="16" y="{:.1f}" transform="rotate(-90 16 {:.1f})" text-anchor="middle">cost (US$)</text>)svg",
      (y.pixel_lo + y.pixel_hi) / 2, (y.pixel_lo + y.pixel_hi) / 2);
  return svg;
}

std::string ScatterChart(const CapacityReport& report) {
  std::vector<size_t> points;
  for (size_t i = 0; i < report.rows.size(); ++i)
    if (report.rows[i].answer() && report.rows[i].cost_usd) points.push_back(i);
  if (points.empty()) return "<p>No priced configuration fits, so there is no chart.</p>";
  std::vector<double> hours, costs;
  for (size_t i : points) {
    hours.push_back(report.rows[i].hours);
    costs.push_back(*report.rows[i].cost_usd);
  }
  const LogAxis x = AxisOver(hours, 80, 640), y = AxisOver(costs, 380, 30);
  const std::vector<std::string> all_types = GpuTypesOf(report);
  std::vector<std::string> types;  // the legend: types with a point
  for (const std::string& t : all_types) {
    if (std::any_of(points.begin(), points.end(),
                    [&](size_t i) { return report.rows[i].gpu == t; }))
      types.push_back(t);
  }
  std::string svg = fmt::format(
      R"(<svg id="scatter" xmlns="http://www.w3.org/2000/svg" width="820" height="430" font-family="sans-serif" font-size="11" role="img" aria-label="time against cost">)");
  svg += ScatterAxes(x, y, "");
  std::string front;
  for (size_t i : report.pareto)
    front +=
        fmt::format("{:.1f},{:.1f} ", x.At(report.rows[i].hours), y.At(*report.rows[i].cost_usd));
  svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="#000" stroke-dasharray="4 3"/>)",
                     front);
  for (size_t i : points) {
    const CapacityRow& r = report.rows[i];
    svg += fmt::format(
        R"(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="{}" fill-opacity="0.8"><title>{}x {}: {:.1f} h, ${:.0f}</title></circle>)",
        x.At(r.hours), y.At(*r.cost_usd), ColorOf(all_types, r.gpu), r.gpus, Escape(r.gpu), r.hours,
        *r.cost_usd);
  }
  for (size_t i : report.pareto) {
    const CapacityRow& r = report.rows[i];
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10">{}x {}</text>)",
                       x.At(r.hours) + 7, y.At(*r.cost_usd) - 6, r.gpus, Escape(r.gpu));
  }
  for (size_t t = 0; t < types.size(); ++t)
    svg += fmt::format(
        R"(<circle cx="670" cy="{0}" r="5" fill="{1}"/><text x="680" y="{2}">{3}</text>)",
        40 + 18 * t, ColorOf(all_types, types[t]), 44 + 18 * t, Escape(types[t]));
  svg += fmt::format(
      R"(<line x1="662" x2="678" y1="{0}" y2="{0}" stroke="#000" stroke-dasharray="4 3"/><text x="684" y="{1}">Pareto front</text>)",
      44 + 18 * types.size(), 48 + 18 * types.size());
  return svg + "</svg>";
}

std::string MemoryBar(const CapacityRow& r) {
  constexpr double kWidth = 360;
  const double budget = static_cast<double>(std::max(r.usable_bytes, r.peak_device_bytes));
  std::string svg = fmt::format(
      R"(<svg class="bar" xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="14">)",
      kWidth + 2);
  double x = 0;
  auto segment = [&](int64_t bytes, const char* color, std::string_view name) {
    const double w = kWidth * static_cast<double>(std::max<int64_t>(bytes, 0)) / budget;
    svg += fmt::format(
        R"(<rect x="{:.1f}" y="1" width="{:.1f}" height="12" fill="{}"><title>{}: {}</title></rect>)",
        x, w, color, name, FormatBytes(bytes));
    x += w;
  };
  for (int c = 0; c < kNumCategories; ++c)
    segment(r.breakdown[c], kCategoryColors[c], CategoryName(static_cast<Category>(c)));
  segment(r.peak_device_bytes - r.peak_allocated_bytes, "#bab0ac", "allocator cache and context");
  svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="0" y2="14" stroke="#000"/>)",
                     kWidth * static_cast<double>(r.usable_bytes) / budget);
  return svg + "</svg>";
}

std::string TableRow(const CapacityReport& report, size_t i) {
  const CapacityRow& r = report.rows[i];
  const bool pareto =
      std::find(report.pareto.begin(), report.pareto.end(), i) != report.pareto.end();
  std::string marks = i == report.cheapest ? " cheapest" : "";
  if (i == report.fastest) marks += " fastest";
  if (pareto) marks += " pareto";
  if (!r.fits)
    return fmt::format(
        R"(<tr class="nofit"><td>{}</td><td>{}</td><td>no</td><td>{}</td><td colspan="6"></td></tr>)",
        Escape(r.gpu), r.gpus, r.solved ? FormatBytes(r.peak_device_bytes) : "-");
  return fmt::format(
      R"(<tr class="fit{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0f}</td><td>{:.0f}%</td><td>{:.1f}</td><td>{}</td><td>{}</td><td>{}</td></tr>)",
      marks, Escape(r.gpu), r.gpus, r.within_limits ? "yes" : "over limit",
      FormatBytes(r.peak_device_bytes), r.time.tokens_per_second, 100 * r.time.mfu, r.hours,
      r.cost_usd ? fmt::format("${:.0f}", *r.cost_usd) : "no price", Escape(PlanSummary(r)),
      MemoryBar(r));
}

std::string Table(const CapacityReport& report) {
  std::string html =
      "<table id=\"configurations\"><thead><tr><th>GPU</th><th>count</th><th>fits</th>"
      "<th>peak per GPU</th><th>tokens/s</th><th>MFU</th><th>hours</th><th>cost</th><th>plan</th>"
      "<th>memory at the peak (line: usable)</th></tr></thead><tbody>";
  for (size_t i = 0; i < report.rows.size(); ++i) html += TableRow(report, i);
  html += "</tbody></table><p class=\"legend\">";
  for (int c = 0; c < kNumCategories; ++c)
    html += fmt::format(R"(<span style="background:{}"></span>{} )", kCategoryColors[c],
                        CategoryName(static_cast<Category>(c)));
  return html + R"(<span style="background:#bab0ac"></span>allocator cache and context</p>)";
}

std::string Assumptions(const CapacitySubject& subject, const CapacityReport& report,
                        const PriceCatalog& prices) {
  std::string html = "<h2>Assumptions</h2><ul>";
  html +=
      fmt::format("<li>Job: {:.3g} tokens. {}</li>", report.job.tokens, Escape(subject.training));
  html += fmt::format("<li><pre>{}</pre></li>", Escape(PriceBasisText(report, prices)));
  html +=
      "<li>Time estimates: a roofline per op, each GPU's data-sheet peak scaled by its "
      "efficiency factors (docs/capacity.md says which measurement each came from):<ul>";
  for (const std::string& gpu : GpuTypesOf(report)) {
    auto d = FindGpu(gpu);
    if (!d) continue;
    html += fmt::format("<li>{}: matmul {:.2f}, bandwidth {:.2f}</li>", Escape(gpu),
                        d->matmul_efficiency, d->bandwidth_efficiency);
  }
  html += "</ul></li>";
  if (!subject.moe_routing.empty())
    html += fmt::format("<li>Mixture of experts routing: {}</li>", Escape(subject.moe_routing));
  for (const std::string& note : report.notes) html += fmt::format("<li>{}</li>", Escape(note));
  return html + "</ul>";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222}"
    ".answer{font-size:20px;padding:12px 16px;background:#eef6ee;border-left:6px solid #2ca02c}"
    "table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;text-align:right}"
    "th{background:#eee}td{white-space:nowrap}td:first-child,td:nth-child(9){text-align:left}"
    "tr.nofit{color:#999}tr.cheapest td:first-child,tr.fastest td:first-child{font-weight:bold}"
    "tr.pareto{background:#f6f6e8}.legend span{display:inline-block;width:12px;height:12px;"
    "margin:0 4px 0 12px}";

}  // namespace

std::string CapacityHtml(const CapacitySubject& subject, const CapacityReport& report,
                         const PriceCatalog& prices) {
  std::string html = fmt::format(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>headroom capacity: "
      "{0}</title><style>{1}</style></head><body><h1>Capacity for {0}</h1>",
      Escape(subject.model), kStyle);
  html += fmt::format("<p class=\"answer\" id=\"answer\">{}</p>", Escape(CapacityHeadline(report)));
  html += fmt::format("<p>{}, {:.3g} tokens; prices as of {}.</p>", Escape(subject.training),
                      report.job.tokens, Escape(prices.as_of));
  html += "<h2>Time against cost</h2>" + ScatterChart(report);
  html += "<h2>Every configuration</h2>" + Table(report);
  html += "<h2>What each GPU type holds</h2><ul>";
  for (const GpuLimits& l : report.limits)
    html += fmt::format(
        "<li>{} at {} GPUs: sequences up to {} tokens{} at micro-batch 1; micro-batch up to {} "
        "(every block checkpointed)</li>",
        Escape(l.gpu), l.gpus, l.longest_seq_len, l.seq_len_capped ? " (the model's limit)" : "",
        l.largest_micro_batch);
  html += "</ul>" + Assumptions(subject, report, prices);
  return html + "</body></html>\n";
}

}  // namespace headroom
