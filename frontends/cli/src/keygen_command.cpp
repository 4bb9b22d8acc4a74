#include "tessera/cli/keygen_command.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include "tessera/cli/commands.hpp"
#include "tessera/core/files.hpp"
#include "tessera/transport/auth.hpp"
#include "subcommands.hpp"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

// --force replaces a regular file only: a link or a folder at PATH is somebody's mistake or trap.
Status check_replaceable(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return Status::ok();  // nothing there: a plain create
  if (S_ISLNK(info.st_mode)) {
    return invalid_argument(fmt::format("secret file '{}' is a symbolic link; keygen does not write through or "
                                        "replace links, even with --force. Remove it or give another PATH",
                                        path));
  }
  if (!S_ISREG(info.st_mode)) {
    return invalid_argument(fmt::format("secret file '{}' is {}, not a regular file; give another PATH", path,
                                        describe_file_type(info.st_mode)));
  }
  return Status::ok();
}

}  // namespace

std::string default_secret_path() {
  if (const char* config = std::getenv("XDG_CONFIG_HOME"); config != nullptr && *config == '/') {
    return (fs::path(config) / "tessera" / "secret").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return (fs::path(home) / ".config" / "tessera" / "secret").string();
  }
  return "tessera.secret";
}

int command_keygen(const KeygenCommand& command, std::ostream& out, std::ostream& err) {
  const bool default_path = command.path.empty();
  const std::string path = default_path ? default_secret_path() : command.path;
  if (default_path && path != "tessera.secret") {
    // The default folder belongs to Tessera: created private when missing; its parents are the user's.
    if (Status made = create_private_folder(fs::path(path).parent_path().string(), ""); !made) {
      return report_failure(err, made);
    }
  }
  if (command.force) {
    if (Status replaceable = check_replaceable(path); !replaceable) return report_failure(err, replaceable);
  }
  Result<std::string> secret = transport::generate_secret();
  if (!secret) return report_failure(err, secret.status());
  const PrivateWrite mode = command.force ? PrivateWrite::kReplace : PrivateWrite::kCreateNew;
  if (Status written = write_private_file(path, *secret + "\n", mode, "secret file"); !written) {
    if (written.code() == StatusCode::kInvalidArgument) {
      return report_failure(err, Status(written.code(), written.message() +
                                                            "; keep it, or pass --force to replace a regular file"));
    }
    return report_failure(err, written);
  }
  out << fmt::format("wrote a new {}-bit secret to {} (mode 0600)\n", transport::kSecretBytes * 8, path);
  out << "Name it in the cluster file (secret_file: " << path
      << ") and install it on every worker as /etc/tessera/secret, root-owned, mode 0600 (docs/deploy.md).\n";
  return kExitOk;
}

Subcommand add_keygen_command(CLI::App& app) {
  auto command = std::make_shared<KeygenCommand>();
  CLI::App* sub = app.add_subcommand(
      "keygen", "write a new random cluster secret to PATH (mode 0600) for secret_file: and /etc/tessera/secret");
  sub->add_option("path", command->path,
                         "where to write it (default $XDG_CONFIG_HOME/tessera/secret, else ~/.config/tessera/secret)");
  sub->add_flag("--force", command->force, "replace an existing regular file at PATH (never a link)");

  return {sub, [command](const Invocation& call) { return command_keygen(*command, call.out, call.err); }};
}

}  // namespace tessera::cli
