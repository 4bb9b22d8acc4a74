#include "tessera/core/files.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "tessera/core/strings.hpp"

namespace tessera {

namespace {

std::string quoted(const std::string& path) { return "'" + printable(path) + "'"; }

// "secret file 'x' has mode 0644"
std::string fmt_mode(unsigned permissions, std::string_view what, const std::string& name) {
  char octal[8];
  std::snprintf(octal, sizeof octal, "%04o", permissions);
  return std::string(what) + " " + name + " has mode " + octal;
}

// Closes on every path out of a function.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// write(2) until all of `content` is out; false with errno set when a write fails.
bool write_all(int fd, std::string_view content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t written = ::write(fd, content.data() + done, content.size() - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      if (written == 0) errno = EIO;
      return false;
    }
    done += static_cast<std::size_t>(written);
  }
  return true;
}

// The folder a path's name lives in ("." for a bare name).
std::string parent_dir(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// A file's name only becomes durable once its folder is synced too. Best effort: some file
// systems refuse fsync on a directory, and the data itself is already on disk.
void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Creates `path` (O_EXCL|O_NOFOLLOW, 0600), writes and fsyncs `content`; removes it again on failure.
Status create_and_write(const std::string& path, std::string_view content, std::string_view what) {
  Descriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
  if (fd.get() < 0) {
    const int error = errno;
    struct stat info {};
    if (error == EEXIST && ::lstat(path.c_str(), &info) == 0) {
      return invalid_argument(std::string(what) + " " + quoted(path) + " already exists (" +
                              describe_file_type(info.st_mode) + "); refusing to overwrite it");
    }
    std::string message = "cannot create " + std::string(what) + " " + quoted(path) + ": " + std::strerror(error);
    if (error == ENOENT) message += "; its folder " + quoted(parent_dir(path)) + " does not exist";
    return io_error(std::move(message));
  }
  // The umask may have cleared bits of 0600 (never added any); a secret must be exactly 0600.
  const bool written = ::fchmod(fd.get(), 0600) == 0 && write_all(fd.get(), content) && ::fsync(fd.get()) == 0;
  if (!written) {
    const int error = errno;
    ::unlink(path.c_str());
    return io_error("cannot write " + std::string(what) + " " + quoted(path) + ": " + std::strerror(error));
  }
  return Status::ok();
}

}  // namespace

Status write_private_file(const std::string& path, std::string_view content, PrivateWrite mode,
                          std::string_view what) {
  if (mode == PrivateWrite::kCreateNew) {
    TESSERA_RETURN_IF_ERROR(create_and_write(path, content, what));
    sync_dir(parent_dir(path));
    return Status::ok();
  }
  const std::filesystem::path target(path);
  const std::string temporary =
      (target.parent_path() / ("." + target.filename().string() + "." + std::to_string(::getpid()) + ".tmp")).string();
  ::unlink(temporary.c_str());  // a leftover of a crashed writer of ours
  TESSERA_RETURN_IF_ERROR(create_and_write(temporary, content, what));
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return io_error("cannot put " + std::string(what) + " in place at " + quoted(path) + ": " + std::strerror(error));
  }
  sync_dir(parent_dir(path));
  return Status::ok();
}

std::string describe_file_type(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

Result<int> open_regular_file(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    const int error = errno;
    std::string message = "cannot open " + std::string(what) + " " + quoted(path) + ": " + std::strerror(error);
    return io_error(error == ENOENT ? message + "; check the path" : message);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return io_error(std::string(what) + " " + quoted(path) + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return invalid_argument(std::string(what) + " " + quoted(path) + " is " + describe_file_type(info.st_mode) +
                            ", not a regular file; give the path of a " + std::string(what));
  }
  // Regular files never block; clearing the flag keeps later reads ordinary.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd.release();
}

namespace {

// `path` opened as a regular file (open_regular_file) and what fstat says of it; the caller closes
// `fd` (through a Descriptor).
struct StatedFile {
  int fd = -1;
  struct stat info {};
};
Result<StatedFile> open_and_stat(const std::string& path, std::string_view what) {
  Result<int> opened = open_regular_file(path, what);
  if (!opened) return opened.status();
  StatedFile file{*opened, {}};
  if (::fstat(file.fd, &file.info) != 0) {
    const int error = errno;
    ::close(file.fd);
    return io_error(std::string(what) + " " + quoted(path) + ": cannot stat: " + std::strerror(error));
  }
  return file;
}

}  // namespace

Result<uint64_t> regular_file_size(const std::string& path, std::string_view what) {
  Result<StatedFile> file = open_and_stat(path, what);
  if (!file) return file.status();
  const Descriptor fd(file->fd);
  return static_cast<uint64_t>(file->info.st_size);
}

namespace {

// Reads the open regular file `fd` to its end, failing once it holds more than `max_bytes`.
Result<std::string> read_capped(int fd, const std::string& path, uint64_t max_bytes, std::string_view what) {
  std::string text;
  std::vector<char> buffer(64 * 1024);
  while (text.size() <= max_bytes) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return io_error(std::string("cannot read ") + std::string(what) + " " + quoted(path) + ": " + std::strerror(errno));
    }
    if (got == 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(got));
  }
  if (text.size() > max_bytes) {
    const std::string limit = max_bytes >= 4096 && max_bytes % 1024 == 0 ? std::to_string(max_bytes / 1024) + " KiB"
                                                                         : std::to_string(max_bytes) + " bytes";
    return resource_exhausted(std::string(what) + " " + quoted(path) + " is larger than " + limit + ", the most a " +
                              std::string(what) + " may be; is it the right file?");
  }
  return text;
}

// Who besides the owner a POSIX access ACL lets read or write the file ("its group", "uid 1001"),
// or nothing when the ACL lets nobody else in. nullopt when the file has no ACL, or one this
// reader does not understand (then the mode bits decide alone). With an ACL the mode's group bits
// are the ACL's mask, not the owning group's permission: systemd's credentials on tmpfs are mode
// 0440 with the group entry empty and one named entry for the service's user.
std::optional<std::string> acl_exposure(int fd, uid_t owner) {
  // Linux's xattr layout (include/uapi/linux/posix_acl_xattr.h): a 4-byte version 2, then 8-byte
  // entries {u16 tag, u16 permissions, u32 id}, little-endian on every platform.
  unsigned char acl[4 + 8 * 64];
  const ssize_t size = ::fgetxattr(fd, "system.posix_acl_access", acl, sizeof acl);
  if (size < 4 || (size - 4) % 8 != 0) return std::nullopt;
  const auto u16 = [&](std::size_t at) { return static_cast<unsigned>(acl[at] | (acl[at + 1] << 8)); };
  const auto u32 = [&](std::size_t at) {
    return static_cast<uint32_t>(acl[at]) | (static_cast<uint32_t>(acl[at + 1]) << 8) |
           (static_cast<uint32_t>(acl[at + 2]) << 16) | (static_cast<uint32_t>(acl[at + 3]) << 24);
  };
  if (u16(0) != 2 || u16(2) != 0) return std::nullopt;
  constexpr unsigned kUser = 0x02, kGroupObj = 0x04, kGroup = 0x08, kMask = 0x10, kOther = 0x20;
  constexpr unsigned kReadWrite = 0x6;
  unsigned mask = 07;
  for (std::size_t at = 4; at + 8 <= static_cast<std::size_t>(size); at += 8) {
    if (u16(at) == kMask) mask = u16(at + 2);
  }
  for (std::size_t at = 4; at + 8 <= static_cast<std::size_t>(size); at += 8) {
    const unsigned tag = u16(at);
    const unsigned permissions = u16(at + 2);
    const uint32_t id = u32(at + 4);
    if (tag == kUser && id != ::geteuid() && id != owner && id != 0 && (permissions & mask & kReadWrite) != 0) {
      return "uid " + std::to_string(id) + " (an ACL entry)";
    }
    if ((tag == kGroupObj || tag == kGroup) && (permissions & mask & kReadWrite) != 0) {
      return tag == kGroupObj ? std::string("its group (through its ACL)") : "gid " + std::to_string(id) + " (an ACL entry)";
    }
    if (tag == kOther && (permissions & kReadWrite) != 0) return std::string("every user");
  }
  return std::string();
}

std::string user_name(uid_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) return found->pw_name;
  return std::to_string(uid);
}

// The privacy rules of check_private_path on what stat said about `path` (fd >= 0: the opened
// file, whose ACL is read too).
Status check_private_info(const struct stat& info, int fd, const std::string& path, PrivateKind kind,
                          std::string_view what) {
  const bool folder = kind == PrivateKind::kFolder;
  const std::string name = quoted(path);
  const std::string shown = printable(path);
  if (folder && S_ISLNK(info.st_mode)) {
    return invalid_config(std::string(what) + " " + name +
                          " is a symbolic link; it holds the cluster secret and links another user could have planted "
                          "are refused. Remove it (rm " + shown + ")");
  }
  if (folder ? !S_ISDIR(info.st_mode) : !S_ISREG(info.st_mode)) {
    return invalid_config(std::string(what) + " " + name + " is " + describe_file_type(info.st_mode) + ", not " +
                          (folder ? "a directory" : "a regular file") + "; remove it");
  }
  const uid_t me = ::geteuid();
  if (info.st_uid != me && info.st_uid != 0) {
    return invalid_config(std::string(what) + " " + name + " belongs to uid " + std::to_string(info.st_uid) +
                          ", not to you (uid " + std::to_string(me) + "); whoever owns it can read or replace " +
                          (folder ? "what is in it" : "the secret") + ". Fix it with chown " + user_name(me) + " " +
                          shown + (folder ? "" : " (and change the secret if others could read it)"));
  }
  const unsigned permissions = info.st_mode & 07777;
  const std::string fix = folder ? "chmod 700 " + shown : "chmod 600 " + shown;
  std::optional<std::string> acl = fd >= 0 ? acl_exposure(fd, info.st_uid) : std::nullopt;
  if (acl && !acl->empty()) {
    return invalid_config(std::string(what) + " " + name + " can be read or changed by " + *acl +
                          ", and it holds the cluster secret. Fix it with setfacl -b " + shown + " && " + fix +
                          " (and change the secret if others could read it)");
  }
  // With an ACL that lets nobody else in, the group bits are its mask and the other bits decide.
  const unsigned exposed = permissions & (acl ? 007u : 077u);
  if (exposed != 0) {
    const bool writable = (exposed & 022) != 0;
    const std::string who = (exposed & 007) != 0 ? "every user" : "its group";
    return invalid_config(fmt_mode(permissions, what, name) + ": " + who + " can " +
                          (writable ? (folder ? "write into" : "change") : (folder ? "look into" : "read")) +
                          " it, and it holds the cluster secret. Fix it with " + fix +
                          " (and change the secret if others could read it)");
  }
  return Status::ok();
}

}  // namespace

Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  Result<int> opened = open_regular_file(path, what);
  if (!opened) return opened.status();
  const Descriptor fd(*opened);
  return read_capped(fd.get(), path, max_bytes, what);
}

Status check_private_path(const std::string& path, PrivateKind kind, std::string_view what) {
  struct stat info {};
  // A folder is inspected as the name itself (a link there is refused); a file through the link.
  const int result = kind == PrivateKind::kFolder ? ::lstat(path.c_str(), &info) : ::stat(path.c_str(), &info);
  if (result != 0) {
    const int error = errno;
    if (error == ENOENT) return not_found(std::string(what) + " " + quoted(path) + " does not exist");
    return io_error("cannot inspect " + std::string(what) + " " + quoted(path) + ": " + std::strerror(error));
  }
  int fd = -1;
  if (S_ISREG(info.st_mode) || S_ISDIR(info.st_mode)) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (kind == PrivateKind::kFolder ? O_NOFOLLOW : 0));
  }
  const Descriptor guard(fd);
  return check_private_info(info, fd, path, kind, what);
}

Result<std::string> read_private_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  Result<StatedFile> file = open_and_stat(path, what);
  if (!file) return file.status();
  const Descriptor fd(file->fd);
  TESSERA_RETURN_IF_ERROR(check_private_info(file->info, fd.get(), path, PrivateKind::kFile, what));
  return read_capped(fd.get(), path, max_bytes, what);
}

Status create_private_folder(const std::string& dir, std::string_view what) {
  std::error_code error;
  const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) return io_error("cannot create " + parent.string() + ": " + error.message());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return io_error("cannot create " + (what.empty() ? std::string() : std::string(what) + " ") + dir + ": " +
                    std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace tessera
