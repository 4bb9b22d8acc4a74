// Reading files a user names without trusting what they are: a path that names a FIFO, a
// directory or a device (/dev/zero) is refused with a message instead of blocking forever or
// being read until memory runs out, and every read has a byte cap chosen by the caller. Writing
// private files (secrets) so that the bytes never go through a link someone planted.
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
