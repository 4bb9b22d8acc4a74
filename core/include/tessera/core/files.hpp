// Reading files a user names without trusting what they are: a path that names a FIFO, a
// directory or a device (/dev/zero) is refused with a message instead of blocking forever or
// being read until memory runs out, and every read has a byte cap chosen by the caller. Writing
// private files (secrets) so that the bytes never go through a link someone planted, and the one
// check that a secret (or the folder holding one) is private before it is used.
//
// Ownership: the functions return values; nothing is cached. Thread-safety: reentrant (no shared
// state); the checks are on the opened descriptor, so a file swapped after the check is not read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/status.hpp"

namespace tessera {

// "a FIFO", "a directory", "a character device", ... for an st_mode; "a regular file" for files.
std::string describe_file_type(unsigned mode);

// Opens `path` read-only and returns the descriptor (O_CLOEXEC) if it is a regular file; the
// caller closes it. Never blocks on a FIFO (it is opened non-blocking, then refused). Failures
// name `what` ("cluster file", "secret file") and the path: IoError when it cannot be
// opened, InvalidArgument when it is not a regular file.
Result<int> open_regular_file(const std::string& path, std::string_view what);

// Same checks as open_regular_file, closing the file again; returns its size in bytes.
Result<uint64_t> regular_file_size(const std::string& path, std::string_view what);

// The whole file, if it is a regular file of at most `max_bytes`. More than that fails with
// ResourceExhausted naming the limit (the file is read one byte past the cap, never its full size,
// so a size that changes while reading cannot overrun the cap).
Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what);

// What must be private: a folder (mode 0700 at most, never a symbolic link: a folder someone else
// planted could be swapped under us) or a file (mode 0600 at most; a link is followed and its
// target checked, so a secret may live wherever its owner keeps it).
enum class PrivateKind { kFolder, kFile };

// OK when only this process's user can read or change `path`: it belongs to the effective user
// (or to root, who can read everything anyway; systemd's LoadCredential= hands services a
// root-owned copy), has no group or other permission bits and no POSIX ACL entry that lets
// another user or a group in. Otherwise kInvalidConfig naming `what`, the path and the command
// that fixes it ("secret file 'lab.secret' has mode 0644: ...; fix it with chmod 600 lab.secret"),
// kNotFound when it does not exist, kIoError when it cannot be inspected. The run directory and
// every secret file (coordinator and worker) go through this one check.
Status check_private_path(const std::string& path, PrivateKind kind, std::string_view what);

// read_regular_file for a secret: the opened file must also pass check_private_path (checked on
// the descriptor that is read, so a file swapped after the check is not what gets read).
Result<std::string> read_private_file(const std::string& path, uint64_t max_bytes, std::string_view what);

enum class PrivateWrite {
  kCreateNew,  // the path must not exist (O_CREAT|O_EXCL|O_NOFOLLOW): never overwrites, never
               // follows a link, even a dangling one
  kReplace,    // written to a new file beside `path` (O_EXCL|O_NOFOLLOW) and renamed over it, so an
               // existing file or link at `path` is replaced, never written through
};
// Writes `content` to `path` with mode 0600 (whatever the umask), fsyncs the file and then its
// folder, so the bytes are on disk when this returns OK. Failures name `what` and the path:
// InvalidArgument when kCreateNew finds something at `path` (saying what it is), IoError when the
// folder is missing or not writable or a write fails; a partly written file is removed.
Status write_private_file(const std::string& path, std::string_view content, PrivateWrite mode,
                          std::string_view what);

// Creates the folder `dir` with mode 0700 when it is missing; its missing parents get the default
// mode (they are the user's, such as ~/.config, not the caller's). An existing `dir` is left as it
// is: a caller that needs it private checks that itself. IoError naming the folder ("cannot create
// <what> <dir>: ..."; `what` may be empty).
Status create_private_folder(const std::string& dir, std::string_view what);

}  // namespace tessera
