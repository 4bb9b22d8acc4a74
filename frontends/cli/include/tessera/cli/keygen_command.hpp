// `tessera keygen`: a new cluster secret in a file only its owner can read.
//
//   tessera keygen [PATH] [--force]
//
// Writes 32 random bytes (OpenSSL RAND_bytes) as 64 hex digits and a newline to PATH, mode 0600,
// fsynced. PATH defaults to $XDG_CONFIG_HOME/tessera/secret (else ~/.config/tessera/secret; the
// tessera folder is created 0700 when missing). An existing PATH is refused unless --force, which
// replaces a regular file by writing beside it and renaming (never through the old file); a
// symbolic link or anything but a regular file at PATH is refused even with --force. The secret
// itself is never printed: `out` gets the path written, `err` the reason for a refusal.
// Exit codes as in commands.hpp: 0 written; 2 PATH exists or is not a file; 1 the folder is missing
// or not writable, or the random generator failed. Not thread-safe (writes to the streams).
#pragma once

#include <iosfwd>
#include <string>

namespace tessera::cli {

struct KeygenCommand {
  std::string path;    // empty: default_secret_path()
  bool force = false;  // replace an existing regular file at `path`
};
int command_keygen(const KeygenCommand& command, std::ostream& out, std::ostream& err);

// $XDG_CONFIG_HOME/tessera/secret when XDG_CONFIG_HOME is an absolute path, else
// $HOME/.config/tessera/secret; "tessera.secret" (in the working folder) when HOME is unset too.
std::string default_secret_path();

}  // namespace tessera::cli
