#include "tessera/core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace tessera {

namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

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

Result<uint64_t> regular_file_size(const std::string& path, std::string_view what) {
  Result<int> opened = open_regular_file(path, what);
  if (!opened) return opened.status();
  const Descriptor fd(*opened);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return io_error(std::string(what) + " " + quoted(path) + ": cannot stat: " + std::strerror(errno));
  }
  return static_cast<uint64_t>(info.st_size);
}

Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  Result<int> opened = open_regular_file(path, what);
  if (!opened) return opened.status();
  const Descriptor fd(*opened);
  std::string text;
  std::vector<char> buffer(64 * 1024);
  while (text.size() <= max_bytes) {
    const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
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
