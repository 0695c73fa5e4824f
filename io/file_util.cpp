#include <tapegrad/io/file_util.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <system_error>

#include <tapegrad/autograd/error.h>

namespace tg::detail {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw IoError(name + ": " + problem);
}

}  // namespace

std::string errno_text(int err) { return std::system_category().message(err); }

std::string printable(std::string_view s, std::size_t max_shown) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max_shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (s.size() > max_shown) out += "...";
  return out;
}

std::string read_file(const std::string& path) {
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  const std::unique_ptr<std::FILE, Close> f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, "cannot open: " + errno_text(errno));
  std::string bytes;
  char buffer[1 << 16];
  while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, f.get()))
    bytes.append(buffer, n);
  if (std::ferror(f.get())) fail(path, "cannot read: " + errno_text(errno));
  return bytes;
}

TempFile::TempFile(const std::string& target) : target_(target) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = target + ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    // open() applies the umask, so the file gets the permissions any new file would get.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt == 100))
      fail(target_, "cannot write: " + errno_text(errno));
  }
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
}

void TempFile::write(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(target_, "cannot write: " + errno_text(errno));
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

// fsync first: after a crash the target holds the old file or the whole new one.
void TempFile::commit() {
  if (::fsync(fd_) != 0) fail(target_, "cannot write: " + errno_text(errno));
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail(target_, "cannot write: " + errno_text(errno));
  if (std::rename(path_.c_str(), target_.c_str()) != 0)
    fail(target_, "cannot replace the file: " + errno_text(errno));
  committed_ = true;
}

}  // namespace tg::detail
