#include "redis/module_probe.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ef {
namespace {

// What one node said: its module version (0 = none), or why that is unknown.
struct NodeAnswer {
  int64_t version = 0;
  std::string unknown;  // non-empty: could not tell
};

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// A failed status only for connection problems.
StatusOr<NodeAnswer> AskNode(RedisConnection& conn) {
  auto version = conn.Command({"EF.VERSION"});
  if (!version.ok()) return version.status();
  if (version->type == RedisReply::Type::kInteger) return NodeAnswer{version->integer, ""};
  if (version->type == RedisReply::Type::kError && StartsWith(version->str, "ERR unknown command"))
    return NodeAnswer{};
  // EF.VERSION refused (e.g. NOPERM): MODULE LIST tells as well, if allowed.
  auto list = conn.Command({"MODULE", "LIST"});
  if (!list.ok()) return list.status();
  if (list->type != RedisReply::Type::kArray) {
    return NodeAnswer{0, "EF.VERSION answered \"" + version->str +
                             "\" and MODULE LIST answered \"" + list->str + "\""};
  }
  for (const RedisReply& module : list->elements) {
    std::string name;
    int64_t ver = 0;
    for (size_t i = 0; i + 1 < module.elements.size(); i += 2) {
      if (module.elements[i].str == "name") name = module.elements[i + 1].str;
      if (module.elements[i].str == "ver") ver = module.elements[i + 1].integer;
    }
    if (name == "ef") return NodeAnswer{ver, ""};
  }
  return NodeAnswer{};
}

std::string Describe(const NodeAnswer& answer) {
  if (!answer.unknown.empty()) return "cannot tell whether it has module ef: " + answer.unknown;
  if (answer.version == 0) return "has no module ef";
  return "has module ef version " + std::to_string(answer.version) + ", needs " +
         std::to_string(kMinEfModuleVersion) + " or later";
}

bool Has(const NodeAnswer& answer) {
  return answer.unknown.empty() && answer.version >= kMinEfModuleVersion;
}

// "host:port" of each slaveN line of INFO replication.
std::vector<std::pair<std::string, int>> ParseReplicas(std::string_view info) {
  std::vector<std::pair<std::string, int>> replicas;
  size_t pos = 0;
  while (pos < info.size()) {
    size_t end = info.find("\r\n", pos);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(pos, end - pos);
    pos = end + 2;
    if (!StartsWith(line, "slave") || line.size() < 6 || line[5] < '0' || line[5] > '9') continue;
    std::string host;
    int port = 0;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view fields = line.substr(colon + 1);
    while (!fields.empty()) {
      size_t comma = fields.find(',');
      std::string_view field = fields.substr(0, comma);
      if (StartsWith(field, "ip=")) host = std::string(field.substr(3));
      if (StartsWith(field, "port="))
        std::from_chars(field.data() + 5, field.data() + field.size(), port);
      if (comma == std::string_view::npos) break;
      fields.remove_prefix(comma + 1);
    }
    if (!host.empty() && port > 0) replicas.emplace_back(host, port);
  }
  return replicas;
}

}  // namespace

std::string ReplicaSet(std::string_view info_replication) {
  std::vector<std::string> names;
  for (const auto& [host, port] : ParseReplicas(info_replication))
    names.push_back(host + ":" + std::to_string(port));
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

StatusOr<std::string> ReadReplicaSet(RedisConnection& conn) {
  auto info = conn.Command({"INFO", "replication"});
  if (!info.ok()) return info.status();
  if (info->type != RedisReply::Type::kString)
    return Unavailable("redis " + conn.address() + ": INFO replication: " + info->str);
  return ReplicaSet(info->str);
}

StatusOr<ModuleProbeResult> ProbeModule(RedisConnection& conn, const RedisOptions& options) {
  ModuleProbeResult result;
  const std::string node = conn.address();
  auto master = AskNode(conn);
  if (!master.ok()) return master.status();
  result.module_on_master = Has(*master);
  result.master_version = master->unknown.empty() ? master->version : 0;
  if (result.module_on_master) {
    auto class_key = conn.Command({"EF.CLASSKEY"});
    if (!class_key.ok()) return class_key.status();
    // Absent only when unknown or refused: an OOM, READONLY or MISCONF reply
    // (the command is flagged write) still means it exists.
    result.class_key = class_key->type == RedisReply::Type::kError &&
                       !StartsWith(class_key->str, "ERR unknown command") &&
                       !StartsWith(class_key->str, "NOPERM");
  }
  if (!result.module_on_master) {
    // Not usable whatever the replicas have: no connections to them (write_mode
    // auto on a Redis without the module probes on every connect).
    result.reason = node + " " + Describe(*master);
    return result;
  }

  auto info = conn.Command({"INFO", "replication"});
  if (!info.ok()) return info.status();
  if (info->type != RedisReply::Type::kString) {
    result.reason =
        node + ": cannot list its replicas: INFO replication answered \"" + info->str + "\"";
    return result;
  }
  result.replica_set = ReplicaSet(info->str);
  std::string first_fault;
  for (const auto& [host, port] : ParseReplicas(info->str)) {
    ++result.replicas_total;
    RedisOptions replica_options = options;
    replica_options.host = host;
    replica_options.port = port;
    const std::string replica = host + ":" + std::to_string(port);
    std::string fault;
    auto replica_conn = RedisConnection::Connect(replica_options);
    if (!replica_conn.ok()) {
      fault = "unreachable: " + replica_conn.status().message();
    } else {
      auto answer = AskNode(**replica_conn);
      if (!answer.ok())
        fault = "unreachable: " + answer.status().message();
      else if (!Has(*answer))
        fault = Describe(*answer);
    }
    if (fault.empty())
      ++result.replicas_with_module;
    else if (first_fault.empty())
      first_fault = "replica " + replica + " " + fault;
  }
  if (!first_fault.empty()) {
    result.reason =
        node + ": " + std::to_string(result.replicas_total - result.replicas_with_module) + " of " +
        std::to_string(result.replicas_total) + " replicas cannot run EF.SETBITS; " + first_fault;
  }
  return result;
}

}  // namespace ef
