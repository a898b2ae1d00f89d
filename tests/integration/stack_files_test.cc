// The stack files (issue 12 part 6: the demo compose stack, the image, the
// systemd units), checked without a Docker engine or a running systemd, each
// against the tool that will read it:
// - docker-compose.yml: `docker-compose config` accepts it; every exposure-filter
//   command in it passes `exposure-filter config check` with the same config file
//   (as mounted), --set keys and EXPOSURE_FILTER_* variables; the addresses it
//   configures name services of the same profile; run and serve of one Redis
//   agree on the layout; every long-running service has a healthcheck and
//   depends_on waits for it; the daemon's and serve's healthchecks, run on this
//   host against a real daemon and serve, pass when /readyz is 200 and fail
//   otherwise, with programs the runtime image has.
// - Dockerfile: Debian 12 stages, the build with scripts/install-deps.sh, a
//   non-root runtime stage that installs the package of every shared library the
//   built binary needs (readelf + dpkg).
// - config/prometheus.yml: `promtool check config`; mounted with the alerts where
//   its rule_files say; scrapes every daemon and serve at their effective ports.
// - config/grafana/: provisioning files of the shape Grafana reads, a default
//   Prometheus data source for the dashboard's DS_PROMETHEUS variable, and the
//   dashboard mounted where the provider looks.
// - config/*.service: `systemd-analyze verify` (ExecStart pointed at the built
//   binary), `systemd-analyze security --offline` and the sandbox directives; the
//   ExecStart arguments pass `config check`.
// Needs docker-compose, promtool, systemd-analyze, readelf and dpkg
// (scripts/install-deps.sh installs them).
#include <signal.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "common/clock.h"
#include "support/process.h"
#include "support/scrape.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

namespace fs = std::filesystem;

std::string Source(const std::string& relative) {
  return std::string(EF_SOURCE_DIR) + "/" + relative;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string Canonical(const std::string& path) {
  std::error_code ec;
  return fs::weakly_canonical(path, ec).string();
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

void RequireTool(const std::string& tool) {
  INFO(tool << " not found: scripts/install-deps.sh installs it");
  REQUIRE(RunCommand({"sh", "-c", "command -v " + tool}).code == 0);
}

// "host:port", "[v6]:port" -> {host, port}; port -1 when there is none.
std::pair<std::string, int> HostPort(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return {address, -1};
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  try {
    return {host, std::stoi(address.substr(colon + 1))};
  } catch (const std::exception&) {
    return {host, -1};
  }
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || StartsWith(host, "127.") || host == "::1";
}

std::vector<std::string> Sequence(const YAML::Node& node) {
  std::vector<std::string> out;
  if (node.IsSequence()) {
    for (const auto& item : node) out.push_back(item.as<std::string>());
  } else if (node.IsScalar()) {
    // The shell form: split on blanks (enough for the commands we write).
    std::stringstream in(node.as<std::string>());
    for (std::string word; in >> word;) out.push_back(word);
  }
  return out;
}

// ---- Dockerfile ----------------------------------------------------------------

struct Instruction {
  std::string op;  // upper case: FROM, RUN, COPY, USER, ENTRYPOINT, CMD, ...
  std::string args;
};
using Stage = std::vector<Instruction>;  // from its FROM on

std::vector<Stage> ParseDockerfile(const std::string& text) {
  std::vector<Stage> stages;
  std::string logical;
  auto flush = [&] {
    const std::string line = Trim(logical);
    logical.clear();
    if (line.empty()) return;
    const auto space = line.find_first_of(" \t");
    Instruction ins{line.substr(0, space),
                    space == std::string::npos ? "" : Trim(line.substr(space))};
    std::transform(ins.op.begin(), ins.op.end(), ins.op.begin(), ::toupper);
    if (ins.op == "FROM") stages.emplace_back();
    if (!stages.empty()) stages.back().push_back(ins);
  };
  for (const std::string& raw : Split(text, '\n')) {
    const std::string line = Trim(raw);
    if (StartsWith(line, "#")) continue;  // comments, also inside continued lines
    if (!line.empty() && line.back() == '\\') {
      logical += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    logical += line;
    flush();
  }
  flush();
  return stages;
}

// The exec form ["a", "b"] of ENTRYPOINT and CMD.
std::vector<std::string> ExecForm(const std::string& args) {
  std::vector<std::string> out;
  try {
    for (const auto& item : nlohmann::json::parse(args)) out.push_back(item.get<std::string>());
  } catch (const std::exception&) {
  }
  return out;
}

std::vector<std::string> LastOf(const Stage& stage, const std::string& op) {
  std::vector<std::string> out;
  for (const auto& ins : stage) {
    if (ins.op == op) out = ExecForm(ins.args);
  }
  return out;
}

// Packages a stage installs: the words after `apt-get install` (options skipped)
// up to the end of that command, and the list of `scripts/install-deps.sh MODE`.
std::set<std::string> InstalledPackages(const Stage& stage) {
  std::set<std::string> packages;
  for (const auto& ins : stage) {
    if (ins.op != "RUN") continue;
    std::stringstream words(ins.args);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    w.push_back("&&");  // so w[i + 1] exists for the last word
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      if (w[i] == "apt-get" && w[i + 1] == "install") {
        for (size_t j = i + 2; j < w.size(); ++j) {
          if (w[j] == "&&" || w[j] == ";" || w[j] == "||" || w[j] == "|") break;
          if (!StartsWith(w[j], "-")) packages.insert(w[j]);
        }
      }
      const bool command_start =
          i == 0 || w[i - 1] == "&&" || w[i - 1] == ";" || w[i - 1] == "||" || w[i - 1] == "|";
      if (command_start && fs::path(w[i]).filename() == "install-deps.sh") {
        std::string mode = "all";
        if (w[i + 1] == "--runtime") mode = "runtime";
        if (w[i + 1] == "--build") mode = "build";
        const auto listed =
            RunCommand({Source("scripts/install-deps.sh"), "--list", mode}, "", true);
        for (const auto& p : Split(listed.out, '\n')) {
          if (!Trim(p).empty()) packages.insert(Trim(p));
        }
      }
    }
  }
  return packages;
}

// The Debian package holding a shared library the loader resolved to `path`
// (dpkg records the path before or after /usr-merge, so both are tried).
std::string OwningPackage(const std::string& path) {
  std::vector<std::string> candidates = {path};
  candidates.push_back(StartsWith(path, "/usr/") ? path.substr(4) : "/usr" + path);
  for (const auto& candidate : candidates) {
    const auto r = RunCommand({"dpkg", "-S", candidate}, "", true);
    if (r.code == 0) {
      const std::string line = Split(r.out, '\n').at(0);
      return line.substr(0, line.find_first_of(":,"));
    }
  }
  return "";
}

// ---- docker-compose.yml --------------------------------------------------------

struct Service {
  std::string name;
  YAML::Node node;
  std::set<std::string> profiles;
  std::vector<std::string> argv;              // what the container runs
  std::map<std::string, std::string> env;     // environment
  std::map<std::string, std::string> mounts;  // container path -> host path
  bool ours = false;                          // built from our Dockerfile
  std::string subcommand;                     // ours: argv[1]
  std::optional<YAML::Node> effective;        // ours, config subcommands: config check
};

struct ComposeStack {
  std::string config_output;  // docker-compose config, or its error
  int config_code = -1;
  std::map<std::string, Service> services;
  std::vector<std::string> problems;  // keys, files or variables the daemon refused
};

// The host file or directory behind a container path: a bind mount of the path or
// of a directory above it.
std::optional<std::string> HostPath(const Service& service, const std::string& container_path) {
  for (const auto& [target, source] : service.mounts) {
    if (container_path == target) return source;
    if (StartsWith(container_path, target + "/")) {
      return source + container_path.substr(target.size());
    }
  }
  return std::nullopt;
}

// Options a subcommand's --help lists ("-c", "--config", "--set", ...).
std::set<std::string> HelpOptions(const std::string& subcommand) {
  static std::map<std::string, std::set<std::string>> cache;
  auto it = cache.find(subcommand);
  if (it != cache.end()) return it->second;
  std::set<std::string> options;
  const auto help = RunCommand({EF_BINARY, subcommand, "--help"}, "", true);
  std::regex option_re(R"((^|[\s,])(--?[A-Za-z][A-Za-z0-9_-]*))");
  for (std::sregex_iterator m(help.out.begin(), help.out.end(), option_re), end; m != end; ++m) {
    options.insert((*m)[2].str());
  }
  cache[subcommand] = options;
  return options;
}

struct ConfigCheck {
  int code = -1;
  std::string out, err;
};

ConfigCheck RunConfigCheck(const std::string& config_path, const std::vector<std::string>& sets,
                           const std::vector<std::string>& env) {
  std::vector<std::string> argv = {EF_BINARY, "config", "check"};
  if (!config_path.empty()) argv.insert(argv.end(), {"-c", config_path});
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
  const auto r = RunCommandWithEnv(argv, env);
  return {r.code, r.out, r.err};
}

// The child's environment: `keep`, and every other EXPOSURE_FILTER_* variable of
// this process set empty (the loader reads empty as unset), so the environment of
// whoever runs the test does not leak into the checks.
std::vector<std::string> ClearedEnvironment(const std::map<std::string, std::string>& keep) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (StartsWith(name, "EXPOSURE_FILTER_") && !keep.count(name)) env.push_back(name + "=");
  }
  for (const auto& [name, value] : keep) env.push_back(name + "=" + value);
  return env;
}

// Runs `config check` the way `service` runs the daemon. Problems are recorded;
// the effective config is still computed without each refused --set, so the
// other checks see as much as possible.
void CheckServiceConfig(const std::vector<Stage>& dockerfile, Service* service,
                        std::vector<std::string>* problems) {
  const std::string& who = service->name;
  const auto& argv = service->argv;
  std::string config_container;
  std::vector<std::string> sets;
  const auto known = HelpOptions(service->subcommand);
  for (size_t i = 2; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (!StartsWith(a, "-")) continue;
    const std::string option = a.substr(0, a.find('='));
    if (!known.count(option)) {
      problems->push_back(who + ": option " + option + " is not one `exposure-filter " +
                          service->subcommand + "` knows");
    }
    if ((a == "-c" || a == "--config") && i + 1 < argv.size()) config_container = argv[i + 1];
    if (StartsWith(a, "--config=")) config_container = a.substr(9);
    if (a == "--set") {
      for (size_t j = i + 1; j < argv.size() && !StartsWith(argv[j], "-"); ++j) {
        // A value naming a file of a mounted volume (kafka.properties.ssl.ca.location
        // =/etc/kafka-ca/ca.crt) is checked on the mounted host file.
        std::string set = argv[j];
        const auto eq = set.find('=');
        if (eq != std::string::npos && StartsWith(set.substr(eq + 1), "/")) {
          if (auto host = HostPath(*service, set.substr(eq + 1)))
            set = set.substr(0, eq + 1) + *host;
        }
        sets.push_back(set);
      }
    }
  }
  if (!known.count("--set")) return;  // not a config-taking subcommand (loadgen, size, ...)

  std::string config_host;
  if (!config_container.empty()) {
    if (auto host = HostPath(*service, config_container)) {
      config_host = *host;
    } else {
      // Not mounted: the copy in the image (COPY <src> <dest> of the last stage).
      for (const auto& ins : dockerfile.back()) {
        std::stringstream words(ins.args);
        std::vector<std::string> w;
        for (std::string word; words >> word;) w.push_back(word);
        if (ins.op == "COPY" && w.size() == 2 && w[1] == config_container) {
          config_host = Source(w[0]);
        }
      }
    }
    if (config_host.empty() || !fs::exists(config_host)) {
      problems->push_back(who + ": config file " + config_container +
                          " is neither mounted from an existing file nor copied into the image");
      return;
    }
  }

  std::map<std::string, std::string> ours_env;
  for (const auto& [name, value] : service->env) {
    if (StartsWith(name, "EXPOSURE_FILTER_")) {
      ours_env[name] = value;
    } else {
      problems->push_back(who + ": environment variable " + name +
                          " is not read by exposure-filter");
    }
  }
  // Each variable must change the effective config: the daemon reads it and it
  // is not a no-op.
  for (const auto& [name, value] : ours_env) {
    auto without = ours_env;
    without.erase(name);
    const auto with_it = RunConfigCheck(config_host, sets, ClearedEnvironment(ours_env));
    const auto without_it = RunConfigCheck(config_host, sets, ClearedEnvironment(without));
    if (with_it.code == 0 && without_it.code == 0 && with_it.out == without_it.out) {
      problems->push_back(who + ": environment variable " + name + "=" + value +
                          " changes nothing in `config check` (not read by exposure-filter, or "
                          "the default)");
    }
  }

  auto remaining = sets;
  for (int attempt = 0; attempt < 50; ++attempt) {
    const auto r = RunConfigCheck(config_host, remaining, ClearedEnvironment(ours_env));
    if (r.code == 0) {
      try {
        service->effective = YAML::Load(r.out);
      } catch (const YAML::Exception& e) {
        problems->push_back(who + ": config check printed no YAML: " + e.what());
      }
      return;
    }
    problems->push_back(who + ": " + Trim(r.err));
    // "exposure-filter: --set redis.cluster: unknown key ..." -> drop that --set.
    std::smatch m;
    const std::regex set_re(R"(--set ([A-Za-z0-9_.]+))");
    if (!std::regex_search(r.err, m, set_re)) return;
    const std::string key = m[1].str();
    const auto before = remaining.size();
    remaining.erase(std::remove_if(remaining.begin(), remaining.end(),
                                   [&](const std::string& s) { return StartsWith(s, key + "="); }),
                    remaining.end());
    if (remaining.size() == before) return;
  }
}

const ComposeStack& LoadCompose() {
  static std::optional<ComposeStack> loaded;
  if (loaded) return *loaded;
  loaded.emplace();
  ComposeStack& stack = *loaded;
  // No engine needed: `config` validates against the Compose schema, interpolates
  // and resolves the anchors, and prints the result (stdout; warnings on stderr).
  const auto r = RunCommandWithEnv({"docker-compose", "-f", Source("docker-compose.yml"),
                                    "--project-directory", EF_SOURCE_DIR, "config"},
                                   {});
  stack.config_code = r.code;
  stack.config_output = r.code == 0 ? r.out : r.err;
  if (r.code != 0) return stack;
  const auto dockerfile = ParseDockerfile(ReadText(Source("Dockerfile")));
  YAML::Node root;
  try {
    root = YAML::Load(r.out);
  } catch (const YAML::Exception& e) {
    stack.config_code = -1;
    stack.config_output = std::string("docker-compose config printed no YAML: ") + e.what();
    return stack;
  }
  for (const auto& entry : root["services"]) {
    Service s;
    s.name = entry.first.as<std::string>();
    s.node = entry.second;
    for (const auto& p : Sequence(s.node["profiles"])) s.profiles.insert(p);
    const YAML::Node env = s.node["environment"];
    if (env.IsMap()) {
      for (const auto& kv : env) {
        s.env[kv.first.as<std::string>()] = kv.second.IsNull() ? "" : kv.second.as<std::string>();
      }
    } else if (env.IsSequence()) {
      for (const auto& item : env) {
        const auto text = item.as<std::string>();
        const auto eq = text.find('=');
        s.env[text.substr(0, eq)] = eq == std::string::npos ? "" : text.substr(eq + 1);
      }
    }
    for (const auto& volume : s.node["volumes"]) {
      std::string source, target;
      if (volume.IsMap()) {
        if (volume["type"] && volume["type"].as<std::string>() != "bind") continue;
        source = volume["source"].as<std::string>();
        target = volume["target"].as<std::string>();
      } else {
        const auto parts = Split(volume.as<std::string>(), ':');
        if (parts.size() < 2) continue;
        source = parts[0];
        target = parts[1];
      }
      if (!StartsWith(source, "/") && !StartsWith(source, ".")) continue;  // a named volume
      s.mounts[target] = Canonical(fs::path(EF_SOURCE_DIR) / source);
    }
    const YAML::Node build = s.node["build"];
    if (build) {
      const std::string context =
          build.IsMap() ? build["context"].as<std::string>() : build.as<std::string>();
      s.ours = Canonical(fs::path(EF_SOURCE_DIR) / context) == Canonical(EF_SOURCE_DIR);
    }
    std::vector<std::string> entrypoint = Sequence(s.node["entrypoint"]);
    std::vector<std::string> command = Sequence(s.node["command"]);
    if (s.ours && !dockerfile.empty()) {
      if (!s.node["entrypoint"]) {
        entrypoint = LastOf(dockerfile.back(), "ENTRYPOINT");
        if (!s.node["command"]) command = LastOf(dockerfile.back(), "CMD");
      }
    }
    s.argv = entrypoint;
    s.argv.insert(s.argv.end(), command.begin(), command.end());
    if (s.ours && s.argv.size() >= 2) s.subcommand = s.argv[1];
    stack.services[s.name] = s;
  }
  for (auto& [name, s] : stack.services) {
    if (!s.ours) continue;
    if (s.argv.empty() || fs::path(s.argv[0]).filename() != "exposure-filter" ||
        s.argv.size() < 2) {
      stack.problems.push_back(name +
                               ": built from the Dockerfile but does not run "
                               "`exposure-filter <subcommand>`");
      continue;
    }
    CheckServiceConfig(dockerfile, &s, &stack.problems);
  }
  return stack;
}

void RequireCompose(const ComposeStack& stack) {
  INFO("docker-compose config:\n" << stack.config_output);
  REQUIRE(stack.config_code == 0);
}

std::string Effective(const Service& s, const std::string& section, const std::string& key) {
  if (!s.effective || !(*s.effective)[section] || !(*s.effective)[section][key]) return "";
  return (*s.effective)[section][key].as<std::string>();
}

std::vector<std::string> Hosts(const std::string& address_list) {
  std::vector<std::string> hosts;
  for (const auto& entry : Split(address_list, ',')) {
    if (!Trim(entry).empty()) hosts.push_back(HostPort(Trim(entry)).first);
  }
  return hosts;
}

bool ClusterNode(const Service& s) {
  for (size_t i = 0; i + 1 < s.argv.size(); ++i) {
    if (s.argv[i] == "--cluster-enabled" && s.argv[i + 1] == "yes") return true;
  }
  return false;
}

// ---- systemd units -------------------------------------------------------------

// "Key=Value" lines of a unit, by key (a key may repeat).
std::multimap<std::string, std::string> UnitEntries(const std::string& text) {
  std::multimap<std::string, std::string> entries;
  for (const auto& raw : Split(text, '\n')) {
    const std::string line = Trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    entries.emplace(Trim(line.substr(0, eq)), Trim(line.substr(eq + 1)));
  }
  return entries;
}

// The exit codes docs/CLI.md's table marks "no" in its "systemd restarts" column
// (rows "| `N` | name | meaning | yes/no |").
std::set<int> DocumentedNoRestartCodes() {
  std::set<int> codes;
  const std::regex row(R"(^\|\s*`(\d+)`\s*\|[^|]*\|[^|]*\|\s*(yes|no)\b)");
  int rows = 0;
  for (const auto& line : Split(ReadText(Source("docs/CLI.md")), '\n')) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    if (m[2] == "no") codes.insert(std::stoi(m[1]));
  }
  CHECK(rows >= 8);  // 0..7: the table was found
  return codes;
}

std::vector<std::string> UnitFiles() {
  std::vector<std::string> units;
  for (const auto& e : fs::directory_iterator(Source("config"))) {
    if (e.path().extension() == ".service") units.push_back(e.path().string());
  }
  std::sort(units.begin(), units.end());
  return units;
}

// The healthcheck's test as a list ("CMD", program, args... or "CMD-SHELL",
// script), or empty when there is none or it is disabled.
std::vector<std::string> HealthcheckArgv(const Service& s) {
  const YAML::Node hc = s.node["healthcheck"];
  if (!hc || !hc["test"] || hc["disable"].as<bool>(false)) return {};
  const auto test = Sequence(hc["test"]);
  if (!test.empty() && test[0] == "NONE") return {};
  return test;
}

TEST_CASE("stack: docker-compose.yml parses and holds the demo stack", "[stack]") {
  RequireTool("docker-compose");
  const ComposeStack& stack = LoadCompose();
  RequireCompose(stack);

  // Kafka in KRaft mode: a broker that is its own controller, no ZooKeeper.
  bool kraft = false;
  for (const auto& [name, s] : stack.services) {
    if (s.env.count("KAFKA_PROCESS_ROLES") &&
        s.env.at("KAFKA_PROCESS_ROLES").find("controller") != std::string::npos) {
      kraft = true;
    }
    CHECK(s.node["image"].as<std::string>("").find("zookeeper") == std::string::npos);
  }
  CHECK(kraft);

  std::vector<const Service*> nodes, creators, runs, serves, loadgens;
  for (const auto& [name, s] : stack.services) {
    if (ClusterNode(s)) nodes.push_back(&s);
    const std::string joined = [&] {
      std::string j;
      for (const auto& a : s.argv) j += a + " ";
      return j;
    }();
    if (joined.find("redis-cli --cluster create") != std::string::npos) creators.push_back(&s);
    if (s.subcommand == "run") runs.push_back(&s);
    if (s.subcommand == "serve") serves.push_back(&s);
    if (s.subcommand == "loadgen") loadgens.push_back(&s);
  }
  // A 6-node Redis Cluster and its one-shot `redis-cli --cluster create`, behind
  // the profile `cluster`.
  CHECK(nodes.size() == 6);
  for (const auto* n : nodes) {
    INFO(n->name);
    CHECK(n->profiles == std::set<std::string>{"cluster"});
  }
  REQUIRE(creators.size() == 1);
  CHECK(creators[0]->profiles == std::set<std::string>{"cluster"});
  CHECK(creators[0]->node["restart"].as<std::string>("no") == "no");

  // The creation script is shell: it must parse (compose's $$ is a literal $).
  std::string script = creators[0]->argv.back();
  for (auto pos = script.find("$$"); pos != std::string::npos; pos = script.find("$$", pos + 1)) {
    script.erase(pos, 1);
  }
  const auto syntax = RunCommand({"sh", "-n", "-c", script});
  INFO(syntax.out);
  CHECK(syntax.code == 0);

  // By default (no profile): a daemon and serve on a single Redis.
  auto single = [&](const std::vector<const Service*>& list) {
    for (const auto* s : list) {
      if (s->profiles.empty() && Hosts(Effective(*s, "redis", "address")).size() == 1) return true;
    }
    return false;
  };
  CHECK(single(runs));
  CHECK(single(serves));
  // With the profile: a daemon and serve in cluster mode on a seed list.
  auto cluster = [&](const std::vector<const Service*>& list) {
    for (const auto* s : list) {
      if (s->profiles.count("cluster") && Effective(*s, "redis", "cluster") == "true" &&
          Hosts(Effective(*s, "redis", "address")).size() >= 2) {
        return true;
      }
    }
    return false;
  };
  CHECK(cluster(runs));
  CHECK(cluster(serves));
  CHECK(!loadgens.empty());
  // With the profile content: `exposure-filter content`, and a one-shot that
  // creates the topic it reads before it starts.
  const Service* content = nullptr;
  for (const auto& [name, s] : stack.services) {
    if (s.subcommand == "content") content = &s;
  }
  REQUIRE(content != nullptr);
  CHECK(content->profiles == std::set<std::string>{"content"});
  const std::string items_topic =
      content->effective ? (*content->effective)["content"]["topic"].as<std::string>("") : "";
  bool items_created = false;
  for (const auto& [name, s] : stack.services) {
    const auto& a = s.argv;
    for (size_t i = 0; i + 1 < a.size(); ++i) {
      if (a[i] == "--topic" && a[i + 1] == items_topic &&
          std::find(a.begin(), a.end(), "--create") != a.end() && s.profiles == content->profiles &&
          content->node["depends_on"][name]) {
        CHECK(content->node["depends_on"][name]["condition"].as<std::string>("") ==
              "service_completed_successfully");
        items_created = true;
      }
    }
  }
  INFO("content's topic " << items_topic << " is created by a one-shot it depends on");
  CHECK(items_created);

  bool prometheus = false, grafana = false;
  for (const auto& [name, s] : stack.services) {
    prometheus |= StartsWith(s.node["image"].as<std::string>(""), "prom/prometheus");
    grafana |= StartsWith(s.node["image"].as<std::string>(""), "grafana/grafana");
  }
  CHECK(prometheus);
  CHECK(grafana);
}

TEST_CASE(
    "stack: every exposure-filter command in docker-compose.yml uses config keys, "
    "files and variables the daemon accepts",
    "[stack]") {
  RequireTool("docker-compose");
  const ComposeStack& stack = LoadCompose();
  RequireCompose(stack);
  int ours = 0;
  for (const auto& [name, s] : stack.services) ours += s.ours;
  CHECK(ours >= 4);  // run and serve, single and cluster; loadgen
  std::string all;
  for (const auto& p : stack.problems) all += "\n  " + p;
  INFO("problems:" << all);
  CHECK(stack.problems.empty());
}

TEST_CASE(
    "stack: docker-compose.yml addresses name services of the same profile, listeners "
    "answer other containers, run and serve of one Redis share the layout",
    "[stack]") {
  RequireTool("docker-compose");
  const ComposeStack& stack = LoadCompose();
  RequireCompose(stack);

  auto check_hosts = [&](const Service& s, const std::string& section, const std::string& key) {
    const std::string value = Effective(s, section, key);
    INFO(s.name << ": " << section << "." << key << " = " << value);
    REQUIRE(!value.empty());
    for (const auto& host : Hosts(value)) {
      INFO("host " << host);
      REQUIRE(stack.services.count(host));
      const Service& target = stack.services.at(host);
      // A service started without a profile must not depend on one that needs it.
      if (s.profiles.empty()) CHECK(target.profiles.empty());
      if (!target.profiles.empty() && !s.profiles.empty()) {
        std::vector<std::string> common;
        std::set_intersection(s.profiles.begin(), s.profiles.end(), target.profiles.begin(),
                              target.profiles.end(), std::back_inserter(common));
        CHECK(!common.empty());
      }
      if (section == "redis" && Effective(s, "redis", "cluster") == "true") {
        CHECK(ClusterNode(target));
      }
    }
  };
  std::map<std::string, std::string> layout_by_redis;
  for (const auto& [name, s] : stack.services) {
    if (s.subcommand != "run" && s.subcommand != "serve" && s.subcommand != "content") continue;
    check_hosts(s, "redis", "address");
    if (s.subcommand == "content") {
      check_hosts(s, "kafka", "bootstrap_servers");
      const auto [host, port] = HostPort(Effective(s, "content", "listen"));
      INFO(name << ": content.listen must answer Prometheus from another container");
      CHECK(port > 0);
      CHECK(!IsLoopback(host));
      // Its healthcheck asks its own listener's /readyz.
      std::string joined;
      for (const auto& a : HealthcheckArgv(s)) joined += a + " ";
      INFO("healthcheck: " << joined);
      CHECK(joined.find("/dev/tcp/127.0.0.1/" + std::to_string(port) + " ") != std::string::npos);
      CHECK(joined.find("/readyz") != std::string::npos);
    } else if (s.subcommand == "run") {
      check_hosts(s, "kafka", "bootstrap_servers");
      const auto [host, port] = HostPort(Effective(s, "metrics", "listen"));
      INFO(name << ": metrics.listen must answer Prometheus from another container");
      CHECK(port > 0);
      CHECK(!IsLoopback(host));
    } else {
      const auto [host, port] = HostPort(Effective(s, "serve", "listen"));
      INFO(name << ": serve.listen must answer other containers");
      CHECK(port > 0);
      CHECK(!IsLoopback(host));
    }
    // The daemon writes and serve reads one layout: filter.* must match.
    if (s.effective) {
      YAML::Emitter filter;
      filter << (*s.effective)["filter"];
      const std::string redis = Effective(s, "redis", "address");
      auto [it, inserted] = layout_by_redis.emplace(redis, filter.c_str());
      INFO(name << ": filter.* differs from another service on redis " << redis);
      CHECK(it->second == filter.c_str());
    }
  }
}

TEST_CASE(
    "stack: config/prometheus.yml passes promtool, loads the alerts as mounted and "
    "scrapes every daemon and serve",
    "[stack]") {
  RequireTool("promtool");
  const auto check = RunCommand({"promtool", "check", "config", Source("config/prometheus.yml")});
  INFO(check.out);
  REQUIRE(check.code == 0);

  RequireTool("docker-compose");
  const ComposeStack& stack = LoadCompose();
  RequireCompose(stack);
  const Service* prometheus = nullptr;
  for (const auto& [name, s] : stack.services) {
    if (StartsWith(s.node["image"].as<std::string>(""), "prom/prometheus")) prometheus = &s;
  }
  REQUIRE(prometheus != nullptr);
  std::string config_path = "/etc/prometheus/prometheus.yml";  // the image's default
  for (const auto& a : prometheus->argv) {
    if (StartsWith(a, "--config.file=")) config_path = a.substr(14);
  }
  const auto mounted = HostPath(*prometheus, config_path);
  REQUIRE(mounted.has_value());
  CHECK(*mounted == Canonical(Source("config/prometheus.yml")));

  const YAML::Node config = YAML::LoadFile(Source("config/prometheus.yml"));
  // rule_files are relative to the config file: in the container they must be
  // mounted from the files promtool just checked next to config/prometheus.yml.
  REQUIRE(config["rule_files"].size() >= 1);
  bool alerts = false;
  for (const auto& rule : config["rule_files"]) {
    const std::string relative = rule.as<std::string>();
    const std::string in_container =
        StartsWith(relative, "/") ? relative
                                  : (fs::path(config_path).parent_path() / relative).string();
    const auto host = HostPath(*prometheus, in_container);
    INFO("rule file " << in_container);
    REQUIRE(host.has_value());
    if (!StartsWith(relative, "/")) {
      CHECK(*host == Canonical(Source("config/" + relative)));
    }
    alerts |= *host == Canonical(Source("config/alerts.yml"));
  }
  CHECK(alerts);

  // (job, host, port) of every target.
  std::set<std::tuple<std::string, std::string, int>> targets;
  for (const auto& job : config["scrape_configs"]) {
    const std::string name = job["job_name"].as<std::string>();
    for (const auto& sc : job["static_configs"]) {
      for (const auto& t : sc["targets"]) {
        const auto [host, port] = HostPort(t.as<std::string>());
        targets.emplace(name, host, port);
      }
    }
    for (const auto& dns : job["dns_sd_configs"]) {
      for (const auto& n : dns["names"]) {
        targets.emplace(name, n.as<std::string>(), dns["port"].as<int>(-1));
      }
    }
  }
  for (const auto& [job, host, port] : targets) {
    INFO("target " << job << " " << host << ":" << port);
    CHECK((IsLoopback(host) || stack.services.count(host) == 1));
  }
  for (const auto& [name, s] : stack.services) {
    if (s.subcommand == "run") {
      // The alerts select up{job="exposure-filter"}.
      const int port = HostPort(Effective(s, "metrics", "listen")).second;
      INFO(name << " is not scraped as job exposure-filter on port " << port);
      CHECK(targets.count({"exposure-filter", name, port}) == 1);
    }
    if (s.subcommand == "serve") {
      const int port = HostPort(Effective(s, "serve", "listen")).second;
      bool scraped = false;
      for (const auto& [job, host, p] : targets) {
        if (host == name && p == port && job != "exposure-filter") scraped = true;
      }
      INFO(name << " is not scraped on port " << port << " (in a job other than exposure-filter)");
      CHECK(scraped);
    }
  }
}

TEST_CASE(
    "stack: Grafana provisioning has a default Prometheus data source and the dashboard "
    "where its provider looks",
    "[stack]") {
  RequireTool("docker-compose");
  const ComposeStack& stack = LoadCompose();
  RequireCompose(stack);
  const Service* grafana = nullptr;
  const Service* prometheus = nullptr;
  for (const auto& [name, s] : stack.services) {
    if (StartsWith(s.node["image"].as<std::string>(""), "grafana/grafana")) grafana = &s;
    if (StartsWith(s.node["image"].as<std::string>(""), "prom/prometheus")) prometheus = &s;
  }
  REQUIRE(grafana != nullptr);
  REQUIRE(prometheus != nullptr);
  // Grafana reads /etc/grafana/provisioning/{datasources,dashboards}: both mounted
  // from config/grafana/.
  const auto datasources = HostPath(*grafana, "/etc/grafana/provisioning/datasources");
  const auto dashboards = HostPath(*grafana, "/etc/grafana/provisioning/dashboards");
  REQUIRE(datasources.has_value());
  REQUIRE(dashboards.has_value());
  CHECK(*datasources == Canonical(Source("config/grafana/datasources")));
  CHECK(*dashboards == Canonical(Source("config/grafana/dashboards")));

  auto yaml_files = [](const std::string& dir) {
    std::vector<std::string> files;
    if (!fs::is_directory(dir)) return files;
    for (const auto& e : fs::directory_iterator(dir)) {
      const auto ext = e.path().extension();
      if (ext == ".yml" || ext == ".yaml") files.push_back(e.path().string());
    }
    return files;
  };
  const std::set<std::string> datasource_keys = {
      "name",         "type",      "uid",      "access",   "url",
      "isDefault",    "editable",  "jsonData", "orgId",    "secureJsonData",
      "version",      "basicAuth", "user",     "database", "withCredentials",
      "basicAuthUser"};
  int default_prometheus = 0;
  for (const auto& file : yaml_files(*datasources)) {
    INFO(file);
    const YAML::Node doc = YAML::LoadFile(file);
    CHECK(doc["apiVersion"].as<int>(0) == 1);
    REQUIRE(doc["datasources"].IsSequence());
    for (const auto& ds : doc["datasources"]) {
      for (const auto& kv : ds) {
        INFO("data source key " << kv.first.as<std::string>());
        CHECK(datasource_keys.count(kv.first.as<std::string>()) == 1);
      }
      CHECK(!ds["name"].as<std::string>("").empty());
      if (ds["type"].as<std::string>("") != "prometheus") continue;
      if (ds["isDefault"].as<bool>(false)) ++default_prometheus;
      // http://<prometheus service>:9090 (the image's --web.listen-address default)
      const std::string url = ds["url"].as<std::string>("");
      const std::regex url_re(R"(https?://([^/:]+):(\d+)/?)");
      std::smatch m;
      INFO("url " << url);
      REQUIRE(std::regex_match(url, m, url_re));
      CHECK(m[1].str() == prometheus->name);
      CHECK(std::stoi(m[2].str()) == 9090);
    }
  }
  // The dashboard's "Data source" variable resolves to the default one.
  CHECK(default_prometheus == 1);

  const auto dashboard = nlohmann::json::parse(ReadText(Source("config/grafana-dashboard.json")));
  bool ds_variable = false;
  for (const auto& v : dashboard["templating"]["list"]) {
    if (v.value("type", "") == "datasource" && v.value("query", "") == "prometheus") {
      ds_variable = true;
    }
  }
  CHECK(ds_variable);

  int providers = 0;
  for (const auto& file : yaml_files(*dashboards)) {
    INFO(file);
    const YAML::Node doc = YAML::LoadFile(file);
    CHECK(doc["apiVersion"].as<int>(0) == 1);
    REQUIRE(doc["providers"].IsSequence());
    for (const auto& p : doc["providers"]) {
      ++providers;
      CHECK(!p["name"].as<std::string>("").empty());
      CHECK(p["type"].as<std::string>("file") == "file");
      const std::string path = p["options"]["path"].as<std::string>("");
      REQUIRE(!path.empty());
      // config/grafana-dashboard.json is mounted inside options.path.
      bool found = false;
      for (const auto& [target, source] : grafana->mounts) {
        if (source == Canonical(Source("config/grafana-dashboard.json")) &&
            StartsWith(target, path + "/") && fs::path(target).extension() == ".json") {
          found = true;
        }
      }
      INFO("provider path " << path);
      CHECK(found);
    }
  }
  CHECK(providers >= 1);
}

TEST_CASE(
    "stack: the Dockerfile builds on Debian 12 with install-deps.sh, runs as non-root "
    "and installs every shared library of the binary",
    "[stack]") {
  RequireTool("readelf");
  RequireTool("dpkg");
  const auto stages = ParseDockerfile(ReadText(Source("Dockerfile")));
  REQUIRE(stages.size() >= 2);  // multi-stage: the runtime image has no compiler
  for (const auto& stage : stages) {
    const std::string image = Split(stage.front().args, ' ').at(0);
    INFO("FROM " << image);
    CHECK((StartsWith(image, "debian:12") || StartsWith(image, "debian:bookworm")));
  }
  bool built_with_script = false;
  for (size_t i = 0; i + 1 < stages.size(); ++i) {
    for (const auto& ins : stages[i]) {
      if (ins.op == "RUN" && ins.args.find("scripts/install-deps.sh") != std::string::npos) {
        built_with_script = true;
      }
    }
  }
  CHECK(built_with_script);

  const Stage& runtime = stages.back();
  std::string user;
  for (const auto& ins : runtime) {
    if (ins.op == "USER") user = ins.args;
  }
  INFO("USER " << user);
  CHECK(!user.empty());
  CHECK(user.substr(0, user.find(':')) != "root");
  CHECK(user.substr(0, user.find(':')) != "0");
  CHECK(LastOf(runtime, "ENTRYPOINT") == std::vector<std::string>{"exposure-filter"});

  const std::set<std::string> installed = InstalledPackages(runtime);
  CHECK(installed.count("build-essential") == 0);
  CHECK(installed.count("cmake") == 0);

  // Every NEEDED library of the built binary, resolved by the loader, owned by a
  // package the runtime stage installs.
  const auto needed = RunCommand({"readelf", "-d", EF_BINARY}, "", true);
  REQUIRE(needed.code == 0);
  const auto ldd = RunCommand({"ldd", EF_BINARY}, "", true);
  REQUIRE(ldd.code == 0);
  std::map<std::string, std::string> resolved;  // soname -> path
  const std::regex ldd_re(R"(^\s*(\S+) => (\S+))");
  for (const auto& line : Split(ldd.out, '\n')) {
    std::smatch m;
    if (std::regex_search(line, m, ldd_re)) resolved[m[1].str()] = m[2].str();
  }
  const std::regex needed_re(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  int libraries = 0;
  for (const auto& line : Split(needed.out, '\n')) {
    std::smatch m;
    if (!std::regex_search(line, m, needed_re)) continue;
    ++libraries;
    const std::string soname = m[1].str();
    INFO(soname << " -> " << resolved[soname]);
    REQUIRE(resolved.count(soname));
    const std::string package = OwningPackage(resolved[soname]);
    INFO("package " << package << " is not installed by the Dockerfile's runtime stage");
    REQUIRE(!package.empty());
    CHECK(installed.count(package) == 1);
  }
  CHECK(libraries >= 5);
}

TEST_CASE(
    "stack: systemd units pass systemd-analyze verify and security, with the sandbox, "
    "and their ExecStart passes config check",
    "[stack][systemd]") {
  RequireTool("systemd-analyze");
  const auto units = UnitFiles();
  std::set<std::string> names;
  for (const auto& u : units) names.insert(fs::path(u).filename().string());
  CHECK(names.count("exposure-filter.service") == 1);
  CHECK(names.count("exposure-filter-serve.service") == 1);
  CHECK(names.count("exposure-filter-content.service") == 1);

  TempDir dir;
  for (const auto& unit : units) {
    const std::string file = fs::path(unit).filename().string();
    INFO(file);
    const std::string text = ReadText(unit);
    const auto entries = UnitEntries(text);

    REQUIRE(entries.count("ExecStart") == 1);
    const std::string exec = entries.find("ExecStart")->second;
    std::vector<std::string> argv;
    {
      std::stringstream words(exec);
      for (std::string w; words >> w;) argv.push_back(w);
    }
    REQUIRE(argv.size() >= 2);
    CHECK(fs::path(argv[0]).filename() == "exposure-filter");
    CHECK((argv[1] == "run" || argv[1] == "serve" || argv[1] == "content"));

    // verify needs the ExecStart binary to exist: point a copy at the built one.
    std::string copy = text;
    const auto at = copy.find("ExecStart=" + argv[0]);
    REQUIRE(at != std::string::npos);
    copy.replace(at + 10, argv[0].size(), EF_BINARY);
    dir.Write(file, copy);
    const auto verify = RunCommand({"systemd-analyze", "verify", "--man=no", dir.File(file)});
    INFO("systemd-analyze verify: " << verify.out);
    CHECK(verify.code == 0);
    CHECK(Trim(verify.out).empty());  // unknown keys and bad values are only warnings
    // Exposure 1.5 of 10 at most ("OK"); without the sandbox a service is ~9.6.
    const auto security = RunCommand(
        {"systemd-analyze", "security", "--offline=true", "--threshold=15", dir.File(file)});
    INFO("systemd-analyze security: " << security.out);
    CHECK(security.code == 0);

    const std::vector<std::pair<std::string, std::string>> required = {
        {"DynamicUser", "yes"},
        {"ProtectSystem", "strict"},
        {"ProtectHome", "yes"},
        {"NoNewPrivileges", "yes"},
        {"PrivateTmp", "yes"},
        {"PrivateDevices", "yes"},
        {"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"},
        {"SystemCallFilter", "@system-service"},
        {"CapabilityBoundingSet", ""},
        {"MemoryDenyWriteExecute", "yes"},
        {"LockPersonality", "yes"},
        {"Restart", "on-failure"},
    };
    for (const auto& [key, value] : required) {
      bool found = false;
      for (auto [it, end] = entries.equal_range(key); it != end; ++it) found |= it->second == value;
      INFO(key << "=" << value);
      CHECK(found);
    }
    CHECK(entries.count("TimeoutStopSec") == 1);
    CHECK(entries.count("LimitNOFILE") == 1);
    // systemctl reload: SIGHUP, which run, serve and content take as a reload of
    // log.* (docs/CLI.md#signals; conventions_test.cc sends it).
    REQUIRE(entries.count("ExecReload") == 1);
    CHECK(entries.find("ExecReload")->second == "/bin/kill -HUP $MAINPID");

    // No restart exactly on the exit codes a restart cannot cure: the table's
    // in code (src/app/exit_codes.h) and in docs/CLI.md.
    REQUIRE(entries.count("RestartPreventExitStatus") == 1);
    std::set<int> prevented;
    {
      std::stringstream words(entries.find("RestartPreventExitStatus")->second);
      for (std::string w; words >> w;) prevented.insert(std::stoi(w));
    }
    CHECK(prevented == std::set<int>(app::kNoRestartCodes.begin(), app::kNoRestartCodes.end()));
    CHECK(prevented == DocumentedNoRestartCodes());

    // The arguments: the config file the unit names is config/exposure-filter.yaml
    // installed; its --set keys must be accepted.
    std::vector<std::string> check = {EF_BINARY, "config", "check"};
    for (size_t i = 2; i < argv.size(); ++i) {
      if ((argv[i] == "-c" || argv[i] == "--config") && i + 1 < argv.size()) {
        const std::string installed = Source("config/" + fs::path(argv[i + 1]).filename().string());
        INFO("config file " << argv[i + 1] << " is not a file of config/");
        REQUIRE(fs::exists(installed));
        check.insert(check.end(), {"-c", installed});
        ++i;
      } else {
        check.push_back(argv[i]);
      }
    }
    const auto r = RunCommandWithEnv(check, ClearedEnvironment({}));
    INFO("config check: " << r.err);
    CHECK(r.code == 0);
  }
}

}  // namespace
}  // namespace ef::test

namespace ef::test {

// Issue 27: one version, from CMakeLists.txt's project() to --version, the
// Docker image tag and /metrics' build_info.
// ---- healthchecks (issue 27 section 4) -------------------------------------------

bool LongRunning(const Service& s) { return s.node["restart"].as<std::string>("no") != "no"; }

TEST_CASE(
    "stack: every long-running service in docker-compose.yml has a healthcheck, and "
    "depends_on waits for it",
    "[stack]") {
  RequireTool("docker-compose");
  const ComposeStack& stack = LoadCompose();
  RequireCompose(stack);
  int apps = 0;
  for (const auto& [name, s] : stack.services) {
    if (!LongRunning(s)) continue;  // one-shots: kafka-init, loadgen, the cluster creation
    INFO(name << ": a long-running service without a healthcheck");
    const auto argv = HealthcheckArgv(s);
    REQUIRE(argv.size() >= 2);
    CHECK((argv[0] == "CMD" || argv[0] == "CMD-SHELL"));
    apps += s.ours;
  }
  CHECK(apps == 5);  // run and serve, on the single Redis and on the cluster; content
  for (const auto& [name, s] : stack.services) {
    const YAML::Node deps = s.node["depends_on"];
    if (!deps) continue;
    std::vector<std::pair<std::string, std::string>> on;  // service, condition
    if (deps.IsSequence()) {
      for (const auto& d : deps) on.emplace_back(d.as<std::string>(), "service_started");
    } else {
      for (const auto& d : deps) {
        on.emplace_back(d.first.as<std::string>(),
                        d.second["condition"].as<std::string>("service_started"));
      }
    }
    for (const auto& [target, condition] : on) {
      INFO(name << " depends on " << target << " with condition " << condition);
      REQUIRE(stack.services.count(target));
      const Service& t = stack.services.at(target);
      if (!HealthcheckArgv(t).empty()) {
        CHECK(condition == "service_healthy");
      } else {
        CHECK(!LongRunning(t));
        CHECK(condition == "service_completed_successfully");
      }
    }
  }
}

// A daemon's or serve's healthcheck run on this host, the container port it
// probes replaced by `port`: true when it exits 0.
bool Probe(const std::vector<std::string>& hc, int container_port, int port) {
  std::vector<std::string> argv(hc.begin() + 1, hc.end());
  const std::string from = "/dev/tcp/127.0.0.1/" + std::to_string(container_port);
  const std::string to = "/dev/tcp/127.0.0.1/" + std::to_string(port);
  for (auto& a : argv) {
    for (auto at = a.find(from); at != std::string::npos; at = a.find(from, at + to.size())) {
      a.replace(at, from.size(), to);
    }
  }
  return RunCommandWithEnv(argv, {}, "", std::chrono::seconds(10)).code == 0;
}

TEST_CASE(
    "stack: the daemon's and serve's healthchecks pass on a ready process and fail on "
    "one that is down or not ready",
    "[stack]") {
  using namespace std::chrono_literals;
  RequireTool("docker-compose");
  RequireTool("dpkg-query");
  const ComposeStack& stack = LoadCompose();
  RequireCompose(stack);

  // Every daemon and serve probes its own listener's /readyz; one probe per kind.
  std::map<std::string, std::vector<std::string>> probe;  // run / serve -> test
  std::map<std::string, int> container_port;
  for (const auto& [name, s] : stack.services) {
    if (s.subcommand != "run" && s.subcommand != "serve") continue;
    INFO(name);
    const auto argv = HealthcheckArgv(s);
    REQUIRE(argv.size() >= 2);
    REQUIRE(argv[0] == "CMD");  // the exec form: programs of the image, no /bin/sh
    const int port =
        HostPort(Effective(s, s.subcommand == "run" ? "metrics" : "serve", "listen")).second;
    REQUIRE(port > 0);
    std::string joined;
    for (const auto& a : argv) joined += a + " ";
    CHECK(joined.find("/dev/tcp/127.0.0.1/" + std::to_string(port) + " ") != std::string::npos);
    CHECK(joined.find("/readyz") != std::string::npos);
    auto [it, inserted] = probe.emplace(s.subcommand, argv);
    if (!inserted) CHECK(it->second == argv);
    container_port[s.subcommand] = port;
  }
  REQUIRE(probe.size() == 2);

  // The programs the probes run come with any Debian (Essential: yes), so the
  // runtime image (debian:12-slim, which has no curl) has them.
  for (const std::string program : {"bash", "head", "grep"}) {
    INFO(program);
    bool used = false;
    for (const auto& [kind, argv] : probe) {
      for (const auto& a : argv) {
        used |= a == program || a.find(program + " ") != std::string::npos;
      }
    }
    CHECK(used);
    const auto path = RunCommand({"sh", "-c", "command -v " + program}, "", true);
    REQUIRE(path.code == 0);
    const std::string package = OwningPackage(Trim(path.out));
    REQUIRE(!package.empty());
    CHECK(RunCommand({"dpkg-query", "-W", "-f=${Essential}", package}, "", true).out == "yes");
  }

  Stack kafka_redis(2);
  const int metrics_port = FreePort();
  const int serve_port = FreePort();
  const std::string config = kafka_redis.WriteConfig(
      "ef.yaml", "metrics:\n  listen: 127.0.0.1:" + std::to_string(metrics_port) + "\n");
  auto daemon_ok = [&] { return Probe(probe["run"], container_port["run"], metrics_port); };
  auto serve_ok = [&] { return Probe(probe["serve"], container_port["serve"], serve_port); };

  // Nothing listening: unhealthy.
  CHECK(!daemon_ok());
  CHECK(!serve_ok());

  // serve up (/healthz 200) with no layout stored yet: /readyz 503, unhealthy.
  auto serve = StartServe(kafka_redis, config, serve_port, {}, "serve.log");
  INFO("serve output:\n" << serve->Output());
  CHECK(!serve_ok());
  CHECK(serve->Running());

  // The daemon joins, gets the partitions and stores the layout: both healthy.
  auto daemon = kafka_redis.StartDaemon(config);
  kafka_redis.Produce(MakeEvents("hc", 20, 2, 1, SystemClock().NowMs(), 7));
  INFO("daemon output:\n" << daemon->Output());
  CHECK(WaitFor(daemon_ok, 30s, 200ms));
  CHECK(WaitFor(serve_ok, 30s, 200ms));

  // Stopped: unhealthy again.
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
  CHECK(!daemon_ok());
  CHECK(serve->Stop(SIGTERM, 30s) == 0);
  CHECK(!serve_ok());
}

TEST_CASE("stack: one version - CMake's project version is --version's and the image tag",
          "[stack][version]") {
  const std::string cmake = ReadText(Source("CMakeLists.txt"));
  std::smatch m;
  REQUIRE(std::regex_search(cmake, m, std::regex(R"(project\(exposure_filter VERSION ([0-9.]+))")));
  const std::string version = m[1];
  CHECK(version == EF_VERSION);
  const RunResult v = RunCommand({EF_BINARY, "--version"});
  CHECK(v.code == 0);
  CHECK(v.out.rfind("exposure-filter " + version + " (revision ", 0) == 0);
  const std::string compose = ReadText(Source("docker-compose.yml"));
  CHECK(compose.find("image: exposure-filter:" + version + "\n") != std::string::npos);
  CHECK(compose.find("image: exposure-filter:local") == std::string::npos);
  // deploy/kubernetes: the base's image tag (every overlay inherits it).
  const YAML::Node kustomization =
      YAML::LoadFile(Source("deploy/kubernetes/base/kustomization.yaml"));
  bool tagged = false;
  for (const auto& image : kustomization["images"]) {
    if (image["name"].as<std::string>() != "exposure-filter") continue;
    CHECK(image["newTag"].as<std::string>() == version);
    tagged = true;
  }
  CHECK(tagged);
}

// ---- deploy/kubernetes (issues 32 and 50) -----------------------------------------
// The values of deploy/kubernetes/examples/credentials-secret.yaml, by key.
std::map<std::string, std::string> ExampleCredentials() {
  std::map<std::string, std::string> values;
  const YAML::Node secret =
      YAML::LoadFile(Source("deploy/kubernetes/examples/credentials-secret.yaml"));
  for (const auto& kv : secret["stringData"]) {
    values[kv.first.as<std::string>()] = kv.second.as<std::string>();
  }
  return values;
}

// A PEM CA bundle of this host: stands in for a Secret's CA certificate.
const char* const kHostCaBundle = "/etc/ssl/certs/ca-certificates.crt";

// Each container of each overlay as a Service of the checks above: its args, its
// EXPOSURE_FILTER_* variables (a Secret's with the example Secret's value), the
// ConfigMap mounted at the -c path and a Secret's certificates (the host's CA
// bundle in their place), written to a temporary directory. Rendered with
// Kustomize's default settings, as `kubectl apply -k` does.
std::vector<Service> KubernetesContainers(const std::string& overlay, const TempDir& dir,
                                          std::vector<std::string>* problems,
                                          std::vector<YAML::Node>* objects) {
  const auto credentials = ExampleCredentials();
  const auto r =
      RunCommand({"kubectl", "kustomize", Source("deploy/kubernetes/overlays/" + overlay)});
  INFO(overlay << ": " << r.out);
  REQUIRE(r.code == 0);
  *objects = YAML::LoadAll(r.out);
  std::map<std::string, YAML::Node> config_maps;
  for (const auto& o : *objects) {
    if (o["kind"].as<std::string>() == "ConfigMap") {
      config_maps[o["metadata"]["name"].as<std::string>()] = o["data"];
    }
  }
  std::vector<Service> out;
  for (const auto& o : *objects) {
    if (o["kind"].as<std::string>() != "Deployment") continue;
    const YAML::Node pod = o["spec"]["template"]["spec"];
    std::map<std::string, std::string> volume_dirs;  // volume name -> its files
    for (const auto& v : pod["volumes"]) {
      if (v["secret"]) {
        const std::string sub = overlay + "-" + v["name"].as<std::string>();
        fs::create_directories(dir.File(sub));
        for (const auto& item : v["secret"]["items"]) {
          const std::string path = item["path"].as<std::string>();
          if (fs::path(path).extension() != ".crt" && fs::path(path).extension() != ".pem") {
            problems->push_back(overlay + ": Secret volume file " + path +
                                " is not a certificate (.crt, .pem): nothing stands in for it");
            continue;
          }
          dir.Write(sub + "/" + path, ReadText(kHostCaBundle));
        }
        volume_dirs[v["name"].as<std::string>()] = dir.File(sub);
        continue;
      }
      if (!v["configMap"]) continue;
      const std::string cm = v["configMap"]["name"].as<std::string>();
      const std::string sub = overlay + "-" + v["name"].as<std::string>();
      fs::create_directories(dir.File(sub));
      if (!config_maps.count(cm)) {
        problems->push_back(overlay + ": volume of ConfigMap " + cm + ", which is not rendered");
        continue;
      }
      for (const auto& kv : config_maps[cm]) {
        dir.Write(sub + "/" + kv.first.as<std::string>(), kv.second.as<std::string>());
      }
      volume_dirs[v["name"].as<std::string>()] = dir.File(sub);
    }
    for (const auto& c : pod["containers"]) {
      Service s;
      s.name = overlay + "/" + o["metadata"]["name"].as<std::string>();
      s.node = YAML::Node(c);
      s.ours = true;
      s.argv = {"exposure-filter"};
      for (const auto& a : c["args"]) s.argv.push_back(a.as<std::string>());
      if (s.argv.size() >= 2) s.subcommand = s.argv[1];
      for (const auto& e : c["env"]) {
        const std::string name = e["name"].as<std::string>();
        if (e["value"]) {
          s.env[name] = e["value"].as<std::string>();
          continue;
        }
        const std::string key = e["valueFrom"]["secretKeyRef"]["key"].as<std::string>("");
        if (!credentials.count(key)) {
          problems->push_back(s.name + ": " + name + " reads Secret key '" + key +
                              "', which deploy/kubernetes/examples/credentials-secret.yaml lacks");
          continue;
        }
        s.env[name] = credentials.at(key);
      }
      for (const auto& m : c["volumeMounts"]) {
        const auto it = volume_dirs.find(m["name"].as<std::string>());
        if (it != volume_dirs.end()) s.mounts[m["mountPath"].as<std::string>()] = it->second;
      }
      out.push_back(s);
    }
  }
  return out;
}

// KEDA's Kafka scaler computes the lag from the group's committed offsets, read
// by a client of its own. The daemon commits what Redis acknowledged every
// pipeline.commit_interval (default 1 s): events produced into a running daemon's
// topic are committed, as another client sees them, within that interval plus a
// margin for the batch and the write.
TEST_CASE(
    "kubernetes: KEDA sees the group caught up within the commit interval after the daemon "
    "writes",
    "[stack][kubernetes]") {
  using namespace std::chrono_literals;
  Stack stack(4);
  const int64_t now = SystemClock().NowMs();
  stack.Produce(MakeEvents("keda-a", 20, 5, 1, now, 1));
  // The default pipeline.commit_interval, 1 s (Stack::StartDaemon would set 200 ms).
  const std::string config = stack.WriteConfig("ef.yaml");
  auto daemon = std::make_unique<Process>(std::vector<std::string>{EF_BINARY, "run", "-c", config},
                                          stack.dir().File("daemon.log"));
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));  // joined the group and wrote
  const auto commit_interval = 1s;
  const auto margin = 4s;
  for (int round = 0; round < 3; ++round) {
    stack.Produce(MakeEvents("keda-b" + std::to_string(round), 20, 5, 1, now, 2 + round));
    const int64_t produced = SteadyNowMs();
    const bool caught_up = WaitFor([&] { return stack.AllCommitted(); },
                                   std::chrono::milliseconds(commit_interval + margin));
    INFO("round " << round << ": committed to the end after " << SteadyNowMs() - produced
                  << " ms (bound " << (commit_interval + margin).count() << " s)");
    CHECK(caught_up);
  }
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

int ListenPort(const YAML::Node& effective, const std::string& section) {
  return HostPort(effective[section]["listen"].as<std::string>("")).second;
}

TEST_CASE(
    "kubernetes: every overlay's containers pass config check, run the project's image and "
    "listen where their probes and Services look",
    "[stack][kubernetes]") {
  RequireTool("kubectl");
  REQUIRE(fs::exists(kHostCaBundle));
  // The image of every container: the base's images: entry, the project version.
  std::string image;
  for (const auto& entry :
       YAML::LoadFile(Source("deploy/kubernetes/base/kustomization.yaml"))["images"]) {
    if (entry["name"].as<std::string>() == "exposure-filter") {
      image = entry["newName"].as<std::string>() + ":" + entry["newTag"].as<std::string>();
    }
  }
  CHECK(image == "registry.example.com/exposure-filter:" + std::string(EF_VERSION));
  const auto dockerfile = ParseDockerfile(ReadText(Source("Dockerfile")));
  std::vector<std::string> overlays;
  for (const auto& e : fs::directory_iterator(Source("deploy/kubernetes/overlays"))) {
    overlays.push_back(e.path().filename().string());
  }
  std::sort(overlays.begin(), overlays.end());
  REQUIRE(overlays.size() >= 6);
  TempDir dir;
  for (const auto& overlay : overlays) {
    std::vector<std::string> problems;
    std::vector<YAML::Node> objects;
    auto containers = KubernetesContainers(overlay, dir, &problems, &objects);
    // run and serve; content with components/content
    std::set<std::string> subcommands;
    for (const auto& s : containers) subcommands.insert(s.subcommand);
    CHECK(containers.size() == subcommands.size());
    CHECK(subcommands.count("run") == 1);
    CHECK(subcommands.count("serve") == 1);
    for (auto& s : containers) {
      INFO(s.name);
      CHECK((s.subcommand == "run" || s.subcommand == "serve" || s.subcommand == "content"));
      CHECK(s.node["image"].as<std::string>() == image);
      CHECK(fs::path(s.argv.at(0)).filename() == "exposure-filter");
      CheckServiceConfig(dockerfile, &s, &problems);
      std::string why;
      for (const auto& p : problems) why += "\n  " + p;
      INFO("config check:" << why);
      REQUIRE(s.effective.has_value());
      const YAML::Node& eff = *s.effective;
      // The probes' and the Service's named port is where the process listens.
      const std::string section = s.subcommand == "serve"     ? "serve"
                                  : s.subcommand == "content" ? "content"
                                                              : "metrics";
      int port = -1;
      for (const auto& p : s.node["ports"]) port = p["containerPort"].as<int>();
      CHECK(ListenPort(eff, section) == port);
      CHECK(!IsLoopback(HostPort(eff[section]["listen"].as<std::string>()).first));
      // KEDA's trigger reads the group and topic this daemon commits to.
      if (s.subcommand != "run") continue;
      for (const auto& o : objects) {
        if (o["kind"].as<std::string>() != "ScaledObject") continue;
        for (const auto& t : o["spec"]["triggers"]) {
          const YAML::Node m = t["metadata"];
          CHECK(m["consumerGroup"].as<std::string>() == eff["kafka"]["group_id"].as<std::string>());
          CHECK(m["bootstrapServers"].as<std::string>() ==
                eff["kafka"]["bootstrap_servers"].as<std::string>());
          std::set<std::string> topics;
          for (const auto& topic : eff["kafka"]["topics"]) topics.insert(topic.as<std::string>());
          CHECK(topics.count(m["topic"].as<std::string>()) == 1);
        }
      }
    }
    INFO(overlay);
    for (const auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
  }
}

// components/content probes `exposure-filter content` on content.listen as the
// daemon's are probed on metrics.listen: the probes' paths answer 200 from a
// running content, on the port its --set names.
TEST_CASE("kubernetes: content answers its Deployment's probes on content.listen",
          "[stack][kubernetes]") {
  using namespace std::chrono_literals;
  RequireTool("kubectl");
  const auto r = RunCommand({"kubectl", "kustomize", Source("deploy/kubernetes/overlays/content")});
  REQUIRE(r.code == 0);
  YAML::Node container;
  for (const auto& o : YAML::LoadAll(r.out)) {
    if (o["kind"].as<std::string>() == "Deployment" &&
        o["metadata"]["name"].as<std::string>() == "exposure-filter-content") {
      container = o["spec"]["template"]["spec"]["containers"][0];
    }
  }
  REQUIRE(container.IsMap());
  std::string listen;
  for (const auto& a : container["args"]) {
    if (StartsWith(a.as<std::string>(), "content.listen=")) listen = a.as<std::string>().substr(15);
  }
  const int port = HostPort(listen).second;
  CHECK(port == container["ports"][0]["containerPort"].as<int>());
  std::set<std::string> paths;
  for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
    INFO(probe);
    REQUIRE(container[probe]["httpGet"]["port"].as<std::string>() ==
            container["ports"][0]["name"].as<std::string>());
    paths.insert(container[probe]["httpGet"]["path"].as<std::string>());
  }
  CHECK(paths == std::set<std::string>{"/healthz", "/readyz"});

  Stack stack(1, "items");
  stack.ProduceRaw({R"({"item_id": "a", "simhash": 1})"});
  const int local = FreePort();
  const std::string config = stack.WriteConfig("ef.yaml", "content:\n  topic: items\n");
  Process cmd({EF_BINARY, "content", "-c", config, "--set",
               "content.listen=127.0.0.1:" + std::to_string(local)},
              stack.dir().File("content.log"));
  for (const auto& path : paths) {
    INFO(path << "\n" << cmd.Output());
    CHECK(WaitFor([&] { return HttpGet(local, path).status == 200; }, 30s, 200ms));
  }
  CHECK(cmd.Running());
  cmd.Signal(SIGTERM);
  CHECK(cmd.Wait(15s) == std::optional<int>(0));
}

}  // namespace ef::test
