#include "planner/report/timeline_export.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "planner/core/text_escape.h"
#include "planner/simulate/live_bytes.h"

namespace headroom {
namespace {

// One sample of the running per-category totals after an event.
struct Sample {
  size_t event;
  CategoryBytes bytes;
  int64_t total;
};

std::vector<Sample> RunningTotals(const Timeline& timeline, int64_t granularity) {
  LiveBytes live(timeline, granularity);
  std::vector<Sample> samples;
  samples.reserve(timeline.events.size());
  for (size_t i = 0; i < timeline.events.size(); ++i) {
    ReplayEvent(timeline.events[i], live);
    samples.push_back({i, live.current_breakdown(), live.live().current});
  }
  return samples;
}

constexpr std::array<const char*, kNumCategories> kColors = {"#4e79a7", "#a0cbe8", "#f28e2b",
                                                             "#e15759", "#59a14f", "#b07aa1"};

}  // namespace

void WriteTimelineCsv(const TimelineExportInputs& in, std::ostream& out) {
  out << "event,step,phase,micro_batch,op,kind,bytes,category,allocated_bytes";
  for (int c = 0; c < kNumCategories; ++c)
    out << "," << CategoryName(static_cast<Category>(c)) << "_bytes";
  out << "\n";
  const std::vector<Sample> samples = RunningTotals(in.timeline, in.granularity);
  for (const Sample& s : samples) {
    const MemoryEvent& e = in.timeline.events[s.event];
    const Phase& p = in.timeline.phases[e.phase];
    out << s.event << "," << p.step << "," << PhaseKindName(p.kind) << "," << p.micro_batch << ","
        << CsvField(p.op.valid() ? in.graph.op(p.op).name : "") << ","
        << (e.kind == MemoryEvent::Kind::kAlloc ? "alloc" : "free") << "," << e.bytes << ","
        << CategoryName(e.category) << "," << s.total;
    for (int64_t b : s.bytes) out << "," << b;
    out << "\n";
  }
}

namespace {

// The SVG chart's geometry: samples, scale and the mapping from (event, GiB) to pixels.
struct SvgChart {
  static constexpr double kGiB = 1024.0 * 1024 * 1024;
  static constexpr double width = 1000, height = 420, left = 70, right = 180, top = 40, bottom = 50;
  static constexpr double plot_w = width - left - right, plot_h = height - top - bottom;

  const TimelineExportInputs& in;
  std::vector<Sample> pts;  // at most ~1500 columns, each its bucket's highest point
  Sample peak;
  double y_max = 0;
  double n_events = 1;

  explicit SvgChart(const TimelineExportInputs& inputs) : in(inputs) {
    const std::vector<Sample> all = RunningTotals(in.timeline, in.granularity);
    // Downsample keeping each bucket's highest point, so the peak survives.
    const size_t max_points = 1500;
    const size_t bucket = std::max<size_t>(1, (all.size() + max_points - 1) / max_points);
    for (size_t i = 0; i < all.size(); i += bucket) {
      const auto end = all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + bucket));
      pts.push_back(*std::max_element(all.begin() + static_cast<std::ptrdiff_t>(i), end, ByTotal));
    }
    if (pts.empty()) pts.push_back({0, {}, 0});
    peak = *std::max_element(pts.begin(), pts.end(), ByTotal);
    y_max = static_cast<double>(std::max(peak.total, in.budget_bytes)) * 1.08 / kGiB + 1e-9;
    n_events = static_cast<double>(std::max<size_t>(1, in.timeline.events.size()));
  }
  static bool ByTotal(const Sample& a, const Sample& b) { return a.total < b.total; }
  double x_of(size_t event) const { return left + plot_w * static_cast<double>(event) / n_events; }
  double y_of(double g) const { return top + plot_h * (1.0 - g / y_max); }

  // Stacked areas, bottom category first.
  void DrawAreas(std::ostream& out) const {
    for (int c = kNumCategories - 1; c >= 0; --c) {
      std::string path;
      for (const Sample& s : pts) {
        int64_t cum = 0;
        for (int k = 0; k <= c; ++k) cum += s.bytes[k];
        path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x_of(s.event),
                            y_of(static_cast<double>(cum) / kGiB));
      }
      path += fmt::format("L{:.1f},{:.1f} L{:.1f},{:.1f} Z", x_of(pts.back().event), y_of(0),
                          x_of(pts.front().event), y_of(0));
      fmt::print(out,
                 R"(<path d="{}" fill="{}" stroke="none"/>)"
                 "\n",
                 path, kColors[c]);
    }
  }

  void DrawAxes(std::ostream& out) const {
    for (int i = 0; i <= 5; ++i) {
      const double g = y_max * i / 5;
      fmt::print(out,
                 R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#ddd"/>)"
                 "\n",
                 left, y_of(g), left + plot_w, y_of(g));
      fmt::print(out,
                 R"(<text x="{}" y="{:.1f}" text-anchor="end">{:.1f} GiB</text>)"
                 "\n",
                 left - 6, y_of(g) + 4, g);
    }
    fmt::print(
        out,
        R"(<text x="{}" y="{}" text-anchor="middle">events over the step (setup, forward, backward, optimizer)</text>)"
        "\n",
        left + plot_w / 2, height - 15);
  }

  void DrawBudget(std::ostream& out) const {
    if (in.budget_bytes > 0) {
      const double yb = y_of(static_cast<double>(in.budget_bytes) / kGiB);
      fmt::print(
          out,
          R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="black" stroke-dasharray="6,4"/>)"
          "\n",
          left, yb, left + plot_w, yb);
      fmt::print(out,
                 R"(<text x="{}" y="{:.1f}" text-anchor="end">budget {:.2f} GiB</text>)"
                 "\n",
                 left + plot_w, yb - 5, static_cast<double>(in.budget_bytes) / kGiB);
    }
  }

  void DrawPeak(std::ostream& out) const {
    const double px = x_of(peak.event), py = y_of(static_cast<double>(peak.total) / kGiB);
    const Phase& phase =
        in.timeline.phases[in.timeline.events.empty() ? 0 : in.timeline.events[peak.event].phase];
    fmt::print(
        out,
        R"(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="none" stroke="red" stroke-width="2"/>)"
        "\n",
        px, py);
    fmt::print(
        out,
        R"(<text x="{:.1f}" y="{:.1f}" fill="red" text-anchor="middle">peak {:.2f} GiB</text>)"
        "\n",
        px, py - 10, static_cast<double>(peak.total) / kGiB);
    fmt::print(out,
               R"(<text x="{}" y="{}" fill="#555">peak at: {}</text>)"
               "\n",
               left, height - 32, MarkupEscaped(DescribePhase(phase, in.graph, in.micro_batches)));
  }

  void DrawLegend(std::ostream& out) const {
    for (int c = 0; c < kNumCategories; ++c) {
      const double ly = top + 20.0 * (kNumCategories - 1 - c);
      fmt::print(out,
                 R"(<rect x="{}" y="{}" width="14" height="14" fill="{}"/>)"
                 "\n",
                 width - right + 15, ly, kColors[c]);
      fmt::print(out,
                 R"(<text x="{}" y="{}">{}</text>)"
                 "\n",
                 width - right + 35, ly + 11, CategoryName(static_cast<Category>(c)));
    }
  }
};

}  // namespace

void WriteTimelineSvg(const TimelineExportInputs& in, std::ostream& out) {
  const SvgChart chart(in);
  fmt::print(
      out,
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)"
      "\n",
      SvgChart::width, SvgChart::height);
  fmt::print(out, R"(<rect width="100%" height="100%" fill="white"/>)"
                  "\n");
  fmt::print(out,
             R"(<text x="{}" y="22" font-size="15" font-weight="bold">{}</text>)"
             "\n",
             SvgChart::left, MarkupEscaped(in.title));
  chart.DrawAreas(out);
  chart.DrawAxes(out);
  chart.DrawBudget(out);
  chart.DrawPeak(out);
  chart.DrawLegend(out);
  out << "</svg>\n";
}

}  // namespace headroom
