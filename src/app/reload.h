// SIGHUP in the long-running commands (run, serve, content): re-read the config
// as at start (the file, the environment, the same --set) and apply what can
// change while running: log.level and log.format. Every other key whose value
// changed is named in a warning: it takes effect at the next restart. A config
// that no longer loads is logged as an error and changes nothing. Each reload
// logs one line starting "SIGHUP:".
//
// Contract: construct after InstallStopSignals(Hangup::kReload) and
// LoadOrReport; one thread polls TakeHangup() every 100 ms until destroyed.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "app/common.h"
#include "config/config.h"

namespace ef::app {

class ConfigReloader {
 public:
  // `args`: how the config was loaded; `current`: what it loaded to.
  ConfigReloader(ConfigArgs args, Config current);
  ~ConfigReloader();
  ConfigReloader(const ConfigReloader&) = delete;
  ConfigReloader& operator=(const ConfigReloader&) = delete;

  // One reload now (the thread calls it on SIGHUP). Public for tests.
  void Reload();

 private:
  ConfigArgs args_;
  Config current_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace ef::app
