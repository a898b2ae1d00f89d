#include "metrics/scrape_sample.h"

namespace ef {

void AppendSample(std::vector<prometheus::MetricFamily>* out, const char* name, const char* help,
                  prometheus::MetricType type, double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  f.metric.emplace_back();
  if (type == prometheus::MetricType::Counter) {
    f.metric.back().counter.value = value;
  } else {
    f.metric.back().gauge.value = value;
  }
  out->push_back(std::move(f));
}

}  // namespace ef
