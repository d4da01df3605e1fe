#include "planner/report/capacity_html.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "planner/core/byte_units.h"
#include "planner/core/gpu_catalog.h"
#include "planner/core/text_escape.h"

namespace headroom {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                                    "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"};
constexpr const char* kCategoryColors[] = {"#4e79a7", "#a0cbe8", "#f28e2b",
                                           "#e15759", "#59a14f", "#edc948"};

std::string ColorOf(const std::vector<std::string>& types, const std::string& gpu) {
  const size_t i = std::find(types.begin(), types.end(), gpu) - types.begin();
  return kPalette[i % std::size(kPalette)];
}

// A log-scaled axis over [lo, hi], 0 < lo < hi, both finite. Whatever the data (a zero
// cost, one of 1e308), it draws at most about kMaxTicks ticks and every coordinate lies
// between its pixel ends: 1-2-5 steps over a few decades, powers of ten a whole number of
// decades apart over more.
struct LogAxis {
  double lo, hi;
  double pixel_lo, pixel_hi;

  static constexpr int kMaxTicks = 30;

  double At(double v) const {
    const double t =
        v > 0 ? std::clamp((std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)),
                           0.0, 1.0)
              : 0.0;
    return pixel_lo + t * (pixel_hi - pixel_lo);
  }
  std::vector<double> Ticks() const {
    const int first = static_cast<int>(std::floor(std::log10(lo)));
    const int last = static_cast<int>(std::ceil(std::log10(hi)));
    const int decades = last - first;
    const bool steps_125 = 3 * (decades + 1) <= kMaxTicks;
    const int stride = steps_125 ? 1 : (decades + kMaxTicks - 1) / kMaxTicks;
    std::vector<double> out;
    const auto add = [&](double t) {
      if (t >= lo && t <= hi) out.push_back(t);
    };
    // One decade times ten at a time, as the chart always counted; a power of ten below
    // the smallest double is 0, so it is taken afresh until one is not.
    double decade = std::pow(10.0, first);
    for (int k = first; k <= last; k += stride) {
      if (!steps_125) {
        add(std::pow(10.0, k));
        continue;
      }
      if (decade == 0) decade = std::pow(10.0, k);
      for (double m : {1.0, 2.0, 5.0}) add(m * decade);
      decade *= 10;
    }
    return out;
  }
};

// The axis over the positive, finite `values` (no other value is drawn), widened by half
// each way but never to 0 or infinity; over [1, 10] when there are none.
LogAxis AxisOver(const std::vector<double>& values, double pixel_lo, double pixel_hi) {
  double lo = 0, hi = 0;
  for (double v : values) {
    if (!(v > 0) || !std::isfinite(v)) continue;
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (lo == 0) return {1, 10, pixel_lo, pixel_hi};
  lo = lo / 1.5 > 0 ? lo / 1.5 : lo;
  hi = std::isfinite(hi * 1.5) ? hi * 1.5 : hi;
  if (!(hi > lo)) {  // the widening rounded away, at either end of the doubles
    if (std::isfinite(lo * 10))
      hi = lo * 10;
    else
      lo = hi / 10;
  }
  return {lo, hi, pixel_lo, pixel_hi};
}

// A point the chart can place: a priced answer with a positive, finite time and cost.
bool Plotted(const CapacityRow& r) { return r.answer() && r.known_cost(); }

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
    if (Plotted(report.rows[i])) points.push_back(i);
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
  std::vector<size_t> pareto;  // the front's points the chart can place
  for (size_t i : report.pareto)
    if (i < report.rows.size() && Plotted(report.rows[i])) pareto.push_back(i);
  for (size_t i : pareto)
    front +=
        fmt::format("{:.1f},{:.1f} ", x.At(report.rows[i].hours), y.At(*report.rows[i].cost_usd));
  svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="#000" stroke-dasharray="4 3"/>)",
                     front);
  for (size_t i : points) {
    const CapacityRow& r = report.rows[i];
    svg += fmt::format(
        R"(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="{}" fill-opacity="0.8"><title>{}x {}: {:.1f} h, ${:.0f}</title></circle>)",
        x.At(r.hours), y.At(*r.cost_usd), ColorOf(all_types, r.gpu), r.gpus, MarkupEscaped(r.gpu),
        r.hours, *r.cost_usd);
  }
  for (size_t i : pareto) {
    const CapacityRow& r = report.rows[i];
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10">{}x {}</text>)",
                       x.At(r.hours) + 7, y.At(*r.cost_usd) - 6, r.gpus, MarkupEscaped(r.gpu));
  }
  for (size_t t = 0; t < types.size(); ++t)
    svg += fmt::format(
        R"(<circle cx="670" cy="{0}" r="5" fill="{1}"/><text x="680" y="{2}">{3}</text>)",
        40 + 18 * t, ColorOf(all_types, types[t]), 44 + 18 * t, MarkupEscaped(types[t]));
  svg += fmt::format(
      R"(<line x1="662" x2="678" y1="{0}" y2="{0}" stroke="#000" stroke-dasharray="4 3"/><text x="684" y="{1}">Pareto front</text>)",
      44 + 18 * types.size(), 48 + 18 * types.size());
  return svg + "</svg>";
}

// A measure in the table: "-" where the JSON has null (not finite), as in the text.
std::string HtmlFixed(double v, int decimals) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "-";
}

std::string MemoryBar(const CapacityRow& r) {
  constexpr double kWidth = 360;
  // At least a byte, so that a row with no sizes draws empty bars, not NaN coordinates.
  const double budget =
      static_cast<double>(std::max({r.usable_bytes, r.peak_device_bytes, int64_t{1}}));
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
        MarkupEscaped(r.gpu), r.gpus, r.solved ? FormatBytes(r.peak_device_bytes) : "-");
  return fmt::format(
      R"(<tr class="fit{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>)",
      marks, MarkupEscaped(r.gpu), r.gpus, r.within_limits ? "yes" : "over limit",
      FormatBytes(r.peak_device_bytes), HtmlFixed(r.time.tokens_per_second, 0),
      HtmlFixed(100 * r.time.mfu, 0), r.known_hours() ? HtmlFixed(r.hours, 1) : "no time",
      r.known_cost() ? fmt::format("${:.0f}", *r.cost_usd) : "no price",
      MarkupEscaped(PlanSummary(r)), MemoryBar(r));
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
  html += fmt::format("<li>Job: {:.3g} tokens. {}</li>", report.job.tokens,
                      MarkupEscaped(subject.training));
  html += fmt::format("<li><pre>{}</pre></li>", MarkupEscaped(PriceBasisText(report, prices)));
  html +=
      "<li>Time estimates: a roofline per op, each GPU's data-sheet peak scaled by its "
      "efficiency factors (docs/capacity.md says which measurement each came from):<ul>";
  for (const std::string& gpu : GpuTypesOf(report)) {
    auto d = FindGpu(gpu);
    if (!d) continue;
    html += fmt::format("<li>{}: matmul {:.2f}, bandwidth {:.2f}</li>", MarkupEscaped(gpu),
                        d->matmul_efficiency, d->bandwidth_efficiency);
  }
  html += "</ul></li>";
  if (!subject.moe_routing.empty())
    html +=
        fmt::format("<li>Mixture of experts routing: {}</li>", MarkupEscaped(subject.moe_routing));
  for (const std::string& note : report.notes)
    html += fmt::format("<li>{}</li>", MarkupEscaped(note));
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
      MarkupEscaped(subject.model), kStyle);
  html += fmt::format("<p class=\"answer\" id=\"answer\">{}</p>",
                      MarkupEscaped(CapacityHeadline(report)));
  html += fmt::format("<p>{}, {:.3g} tokens; prices as of {}.</p>", MarkupEscaped(subject.training),
                      report.job.tokens, MarkupEscaped(prices.as_of));
  html += "<h2>Time against cost</h2>" + ScatterChart(report);
  html += "<h2>Every configuration</h2>" + Table(report);
  html += "<h2>What each GPU type holds</h2><ul>";
  for (const GpuLimits& l : report.limits)
    html += fmt::format(
        "<li>{} at {} GPUs: sequences up to {} tokens{} at micro-batch 1; micro-batch up to {} "
        "(every block checkpointed)</li>",
        MarkupEscaped(l.gpu), l.gpus, l.longest_seq_len,
        l.seq_len_capped ? " (the model's limit)" : "", l.largest_micro_batch);
  html += "</ul>" + Assumptions(subject, report, prices);
  return html + "</body></html>\n";
}

}  // namespace headroom
