#include "app/reload.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "config/loader.h"

namespace ef::app {

ConfigReloader::ConfigReloader(ConfigArgs args, Config current)
    : args_(std::move(args)), current_(std::move(current)) {
  thread_ = std::thread([this] {
    while (!done_.load()) {
      if (TakeHangup()) Reload();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

ConfigReloader::~ConfigReloader() {
  done_.store(true);
  thread_.join();
}

void ConfigReloader::Reload() {
  const std::string source = args_.path.empty() ? "(defaults)" : args_.path;
  StatusOr<Config> next = LoadConfig(args_.path, args_.overrides);
  if (!next.ok()) {
    spdlog::error("SIGHUP: {} does not load, nothing changed: {}", source, next.status().message());
    return;
  }
  std::string applied;
  std::string later;
  const auto append = [](std::string* list, const std::string& item) {
    *list += (list->empty() ? "" : ", ") + item;
  };
  for (const std::string& key : ChangedKeys(current_, *next)) {
    if (key == "log.level") {
      append(&applied, key + " " + current_.log.level + " -> " + next->log.level);
    } else if (key == "log.format") {
      append(&applied, key + " " + current_.log.format + " -> " + next->log.format);
    } else {
      append(&later, key);
    }
  }
  // Only log.* changes: the other keys stay what runs, so a later SIGHUP names
  // them again until the restart.
  current_.log = next->log;
  SetUpLogging(current_.log.level, current_.log.format);
  // Shown at any log.level: at info, or at the level below which nothing shows.
  spdlog::log(std::max(spdlog::level::info, spdlog::default_logger()->level()),
              "SIGHUP: reloaded {}: {}{}", source, applied.empty() ? "log.* unchanged" : applied,
              later.empty() ? std::string() : "; changed, applied at the next restart: " + later);
}

}  // namespace ef::app
