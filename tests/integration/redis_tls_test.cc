// Redis over TLS (issue 49 item 1): the daemon, `check` (the client library)
// and the test's own readers against a real TLS-only redis-server, with a CA
// and certificates this test makes (support/tls_certs.h). What is refused, and
// how: a certificate that does not verify, a name that does not match, a
// server that wants our certificate when we have none.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "redis/connection.h"
#include "support/fault_stream.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// `exposure-filter check -u <user> <items...>` with --set overrides.
SplitRunResult Check(const std::string& user, const std::vector<std::string>& items,
                     const std::vector<std::string>& sets) {
  std::vector<std::string> args = {"check", "-u", user};
  args.insert(args.end(), items.begin(), items.end());
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return Ef(args, {}, "", 60s);
}

// The --set overrides that point at `redis` over TLS trusting `ca`.
std::vector<std::string> TlsSets(const RedisServer& redis, const std::string& ca) {
  return {"redis.address=" + redis.address(), "redis.tls.enabled=true", "redis.tls.ca_file=" + ca};
}

}  // namespace

TEST_CASE("redis tls: the daemon writes over TLS and every exposure is read back",
          "[integration][redis][tls]") {
  TempDir certs_dir;
  const TlsCerts certs = MakeTlsCerts(certs_dir);
  Stack stack(RedisTls{certs});
  // The server speaks TLS only: a plain connection to it gets nothing.
  RedisOptions plain;
  plain.port = stack.redis().port();
  plain.command_timeout_ms = 2000;
  CHECK_FALSE(RedisConnection::Connect(plain).ok());

  const int64_t now = SystemClock().NowMs();
  const auto events = MakeEvents("tls", 100, 20, 2, now, 49);
  stack.Produce(events);
  const std::string config = stack.WriteConfig();
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  // Read over TLS (the server's ClientOptions): 0 false negatives.
  const auto missing = MissingItems(*stack.redis().Connect(), DefaultTestLayout(), events);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());

  // `check` (the client library) over TLS sees them too.
  const TestEvent& e = events.front();
  const SplitRunResult r = Ef({"check", "-c", config, "-u", e.user, e.items[0], "never-seen"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 0);
  CHECK(Contains(r.out, "seen    " + e.items[0]));
  CHECK(Contains(r.out, "unseen  never-seen"));

  // `serve` over TLS: ready, and the same answer over HTTP.
  const int port = FreePort();
  auto serve = StartServe(stack, config, port, {}, "serve-tls.log");
  INFO("serve output:\n" << serve->Output());
  httplib::Client http("127.0.0.1", port);
  auto ready = http.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  CHECK(ready->body == "ready\n");
  const std::string body =
      R"({"user_id": ")" + e.user + R"(", "items": [")" + e.items[0] + R"(", "never-seen"]})";
  auto filtered = http.Post("/v1/filter", body, "application/json");
  REQUIRE(filtered);
  CHECK(filtered->status == 200);
  CHECK(filtered->body == R"({"unseen":["never-seen"],"seen_count":1})");
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE("redis tls: a server certificate from another CA is refused with exit 3 and one line",
          "[integration][redis][tls]") {
  TempDir certs_dir;
  const TlsCerts certs = MakeTlsCerts(certs_dir);
  RedisServer redis(RedisTls{certs});
  const std::string expected = "exposure-filter: redis " + redis.address() +
                               ": TLS handshake failed: certificate verify failed "
                               "(self-signed certificate in certificate chain)\n";
  // check: the client library.
  const SplitRunResult r = Check("u1", {"i1"}, TlsSets(redis, certs.other_ca));
  INFO("stderr: " << r.err);
  CHECK(r.code == 3);
  CHECK(r.err == expected);

  // run: refused for good at start, so it exits 3 instead of waiting for Redis.
  Stack stack(1);
  const std::string config = stack.WriteConfig(
      "ef.yaml", "redis:\n  address: \"" + redis.address() +
                     "\"\n  tls:\n    enabled: true\n    ca_file: \"" + certs.other_ca + "\"\n");
  auto daemon = stack.StartDaemon(config);
  const std::optional<int> code = daemon->Wait(30s);
  INFO("daemon log:\n" << daemon->Output());
  REQUIRE(code.has_value());
  CHECK(*code == 3);
  CHECK(Contains(daemon->Output(),
                 "redis " + redis.address() + ": TLS handshake failed: certificate verify failed"));
}

TEST_CASE("redis tls: the name verified is the host or redis.tls.server_name",
          "[integration][redis][tls]") {
  TempDir certs_dir;
  const TlsCerts certs = MakeTlsCerts(certs_dir);
  RedisServer redis(RedisTls{certs});
  auto sets = TlsSets(redis, certs.ca);
  // 127.0.0.1 is one of the certificate's IP addresses.
  CHECK(Check("u1", {"i1"}, sets).code == 0);
  // localhost is one of its DNS names (sent as SNI too).
  sets.push_back("redis.tls.server_name=localhost");
  CHECK(Check("u1", {"i1"}, sets).code == 0);
  sets.back() = "redis.tls.server_name=redis.example.com";
  const SplitRunResult r = Check("u1", {"i1"}, sets);
  INFO("stderr: " << r.err);
  CHECK(r.code == 3);
  CHECK(r.err == "exposure-filter: redis " + redis.address() +
                     ": TLS handshake failed: certificate verify failed (hostname mismatch: the "
                     "server's certificate is not for 'redis.example.com'; "
                     "redis.tls.server_name sets the name to verify)\n");
  // verify false: any name, any CA (encryption only).
  const SplitRunResult unverified =
      Check("u1", {"i1"},
            {"redis.address=" + redis.address(), "redis.tls.enabled=true",
             "redis.tls.ca_file=" + certs.other_ca, "redis.tls.server_name=redis.example.com",
             "redis.tls.verify=false"});
  INFO("stderr: " << unverified.err);
  CHECK(unverified.code == 0);
}

TEST_CASE("redis tls: mutual TLS works with a client certificate and is refused without",
          "[integration][redis][tls]") {
  TempDir certs_dir;
  const TlsCerts certs = MakeTlsCerts(certs_dir);
  RedisServer redis(RedisTls{certs, "yes"});
  auto sets = TlsSets(redis, certs.ca);
  const SplitRunResult without = Check("u1", {"i1"}, sets);
  INFO("stderr: " << without.err);
  CHECK(without.code == 3);
  CHECK_THAT(without.err, Catch::StartsWith("exposure-filter: redis " + redis.address() +
                                            ": TLS handshake failed: "));
  // The server's alert, or (when the reset overtook it) what it asked for.
  CHECK((Contains(without.err, "certificate required") ||
         Contains(without.err, "the server asks for a certificate: redis.tls.cert_file")));
  CHECK(std::count(without.err.begin(), without.err.end(), '\n') == 1);

  sets.push_back("redis.tls.cert_file=" + certs.client_cert);
  sets.push_back("redis.tls.key_file=" + certs.client_key);
  const SplitRunResult with = Check("u1", {"i1"}, sets);
  INFO("stderr: " << with.err);
  CHECK(with.code == 0);
  CHECK(Contains(with.out, "unseen  i1"));
}

TEST_CASE("redis tls: rediss:// in redis.address turns TLS on", "[integration][redis][tls]") {
  TempDir certs_dir;
  const TlsCerts certs = MakeTlsCerts(certs_dir);
  RedisServer redis(RedisTls{certs});
  const SplitRunResult r = Check(
      "u1", {"i1"}, {"redis.address=rediss://" + redis.address(), "redis.tls.ca_file=" + certs.ca});
  INFO("stderr: " << r.err);
  CHECK(r.code == 0);
  CHECK(Contains(r.out, "unseen  i1"));
  // The effective config says so.
  const SplitRunResult shown =
      Ef({"config", "check", "--set", "redis.address=rediss://" + redis.address()});
  INFO("config check: " << shown.out << shown.err);
  CHECK(shown.code == 0);
  CHECK(Contains(shown.out, "  tls:\n    enabled: true\n"));
}

TEST_CASE("redis tls: the CAs come from ca_file, ca_dir or OpenSSL's defaults",
          "[integration][redis][tls]") {
  TempDir dir;
  const TlsCerts certs = MakeTlsCerts(dir);
  RedisServer redis(RedisTls{certs});
  const std::vector<std::string> on = {"redis.address=" + redis.address(),
                                       "redis.tls.enabled=true"};
  // No CA configured: OpenSSL's defaults, which do not hold the test's CA...
  const SplitRunResult system = Check("u1", {"i1"}, on);
  INFO("stderr: " << system.err);
  CHECK(system.code == 3);
  CHECK(Contains(system.err, ": TLS handshake failed: certificate verify failed ("));
  // ... unless SSL_CERT_FILE names a bundle that does.
  std::vector<std::string> args = {"check", "-u", "u1", "i1"};
  for (const auto& s : on) {
    args.push_back("--set");
    args.push_back(s);
  }
  const SplitRunResult env = Ef(args, {"SSL_CERT_FILE=" + certs.ca});
  INFO("stderr: " << env.err);
  CHECK(env.code == 0);
  // A hashed directory (openssl rehash).
  std::filesystem::create_directory(dir.File("cas"));
  std::filesystem::copy_file(certs.ca, dir.File("cas/ca.pem"));
  REQUIRE(RunCommand({"openssl", "rehash", dir.File("cas")}).code == 0);
  auto sets = on;
  sets.push_back("redis.tls.ca_dir=" + dir.File("cas"));
  const SplitRunResult hashed = Check("u1", {"i1"}, sets);
  INFO("stderr: " << hashed.err);
  CHECK(hashed.code == 0);
}

TEST_CASE("redis tls: the CA file is read again at every connect", "[integration][redis][tls]") {
  TempDir dir;
  const TlsCerts certs = MakeTlsCerts(dir);
  RedisServer redis(RedisTls{certs});
  RedisOptions o = redis.ClientOptions();
  o.tls.ca_file = dir.File("trusted.pem");
  std::filesystem::copy_file(certs.other_ca, o.tls.ca_file);
  auto refused = RedisConnection::Connect(o);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kPermissionDenied);
  // The file renewed on disk: the next connect uses it.
  std::filesystem::copy_file(certs.ca, o.tls.ca_file,
                             std::filesystem::copy_options::overwrite_existing);
  auto accepted = RedisConnection::Connect(o);
  INFO(accepted.status().ToString());
  CHECK(accepted.ok());
}

TEST_CASE("redis tls: files that cannot be used are config errors (exit 4) naming the key",
          "[integration][redis][tls]") {
  TempDir dir;
  const TlsCerts certs = MakeTlsCerts(dir);
  dir.Write("not-pem.txt", "hello\n");
  REQUIRE(RunCommand({"openssl", "pkey", "-in", certs.client_key, "-aes256", "-passout",
                      "pass:secret", "-out", dir.File("encrypted.key")})
              .code == 0);
  struct Case {
    std::vector<std::string> sets;
    std::string error;
  };
  const std::string on = "redis.tls.enabled=true";
  const std::vector<Case> cases = {
      {{on, "redis.tls.ca_file=" + dir.File("missing.pem")},
       "redis.tls.ca_file: cannot read '" + dir.File("missing.pem") +
           "': No such file or directory"},
      {{on, "redis.tls.ca_file=" + dir.File("not-pem.txt")},
       "redis.tls.ca_file: cannot read '" + dir.File("not-pem.txt") + "': no PEM certificate ("},
      {{on, "redis.tls.ca_dir=" + certs.ca},
       "redis.tls.ca_dir: cannot read '" + certs.ca + "': not a directory"},
      {{on, "redis.tls.cert_file=" + certs.client_cert, "redis.tls.key_file=" + certs.server_key},
       "redis.tls.key_file: '" + certs.server_key + "' does not match redis.tls.cert_file '" +
           certs.client_cert + "' ("},
      {{on, "redis.tls.cert_file=" + certs.client_cert,
        "redis.tls.key_file=" + dir.File("encrypted.key")},
       "redis.tls.key_file: cannot read '" + dir.File("encrypted.key") +
           "': no unencrypted PEM private key ("},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"config", "check"};
    for (const auto& s : c.sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    const SplitRunResult r = Ef(args);
    INFO("sets: " << c.sets.back() << "\nstderr: " << r.err);
    CHECK(r.code == 4);
    CHECK_THAT(r.err, Catch::StartsWith("exposure-filter: " + c.error));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // The same when a command starts (check exits 4 before it connects).
  const SplitRunResult r = Check("u1", {"i1"}, cases[0].sets);
  CHECK(r.code == 4);
  CHECK_THAT(r.err, Catch::StartsWith("exposure-filter: " + cases[0].error));
}

TEST_CASE("redis tls: a handshake that gets no answer ends at redis.connect_timeout",
          "[integration][redis][tls]") {
  TempDir certs_dir;
  const TlsCerts certs = MakeTlsCerts(certs_dir);
  RedisServer redis(RedisTls{certs});
  redis.Signal(SIGSTOP);  // accepts connections (the kernel's backlog), answers nothing
  auto sets = TlsSets(redis, certs.ca);
  sets.push_back("redis.connect_timeout=1s");
  sets.push_back("redis.command_timeout=1s");
  sets.push_back("redis.cluster=false");
  const auto start = std::chrono::steady_clock::now();
  const SplitRunResult r = Check("u1", {"i1"}, sets);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  redis.Signal(SIGCONT);
  INFO("stderr: " << r.err << "\nwall: " << wall << " s");
  CHECK(r.code == 6);
  std::smatch m;
  REQUIRE(std::regex_search(
      r.err, m,
      std::regex(
          "redis " + redis.address() +
          ": TLS handshake: no answer within [a-z._ ']+ \\((\\d+) ms\\); waited ([0-9.]+) s")));
  const double waited = std::stod(m[2].str());
  CHECK(waited >= 0.9);
  CHECK(waited < 5);
  CHECK(wall < 20);
}

}  // namespace ef::test
