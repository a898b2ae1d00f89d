#include "support/tls_certs.h"

#include <stdexcept>
#include <vector>

#include "support/process.h"

namespace ef::test {
namespace {

void Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  const RunResult r = RunCommand(args);
  if (r.code != 0) throw std::runtime_error("openssl " + args[1] + " failed: " + r.out);
}

// A key and a certificate for `subject` signed by ca/ca_key with extensions `ext`.
void Issue(const TempDir& dir, const std::string& name, const std::string& subject,
           const std::string& ca, const std::string& ca_key, const std::string& ext, int serial) {
  dir.Write(name + ".ext", ext);
  Openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", dir.File(name + ".key"), "-out", dir.File(name + ".csr"), "-subj", subject});
  Openssl({"x509", "-req", "-in", dir.File(name + ".csr"), "-CA", ca, "-CAkey", ca_key,
           "-set_serial", std::to_string(serial), "-days", "2", "-out", dir.File(name + ".pem"),
           "-extfile", dir.File(name + ".ext")});
}

void MakeCa(const TempDir& dir, const std::string& name, const std::string& subject) {
  Openssl({"req",
           "-x509",
           "-new",
           "-newkey",
           "ec",
           "-pkeyopt",
           "ec_paramgen_curve:prime256v1",
           "-nodes",
           "-keyout",
           dir.File(name + ".key"),
           "-out",
           dir.File(name + ".pem"),
           "-days",
           "2",
           "-subj",
           subject,
           "-addext",
           "basicConstraints=critical,CA:TRUE",
           "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"});
}

}  // namespace

TlsCerts MakeTlsCerts(const TempDir& dir) {
  TlsCerts c;
  MakeCa(dir, "ca", "/CN=ef test CA");
  MakeCa(dir, "other-ca", "/CN=ef other CA");
  c.ca = dir.File("ca.pem");
  c.other_ca = dir.File("other-ca.pem");
  Issue(dir, "server", "/CN=localhost", c.ca, dir.File("ca.key"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyAgreement\n"
        "extendedKeyUsage=serverAuth,clientAuth\n",
        1);
  Issue(dir, "client", "/CN=ef-client", c.ca, dir.File("ca.key"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyAgreement\n"
        "extendedKeyUsage=clientAuth\n",
        2);
  c.server_cert = dir.File("server.pem");
  c.server_key = dir.File("server.key");
  c.client_cert = dir.File("client.pem");
  c.client_key = dir.File("client.key");
  return c;
}

TlsOptions ClientTls(const TlsCerts& certs, bool client_cert) {
  TlsOptions t;
  t.enabled = true;
  t.ca_file = certs.ca;
  if (client_cert) {
    t.cert_file = certs.client_cert;
    t.key_file = certs.client_key;
  }
  return t;
}

}  // namespace ef::test
