#include "common/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

extern char** environ;

namespace servesweep {

ChildProcess::~ChildProcess() {
  if (started() && !exit_status_) Stop(std::chrono::milliseconds(500));
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), exit_status_(std::exchange(other.exit_status_, {})) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (started() && !exit_status_) Stop(std::chrono::milliseconds(500));
    pid_ = std::exchange(other.pid_, -1);
    exit_status_ = std::exchange(other.exit_status_, {});
  }
  return *this;
}

namespace {

// Forks on one thread that lives as long as the process. PR_SET_PDEATHSIG fires when the
// *thread* that forked exits, not the process: an engine kept up across runs must not die with
// the run thread that started it, and every child must still die with the process.
class ForkThread {
 public:
  static ForkThread& Get() {
    static ForkThread* thread = new ForkThread();  // never destroyed: it lives until exit
    return *thread;
  }
  Status Run(const std::function<Status()>& fork) {
    if (std::this_thread::get_id() == thread_.get_id()) return fork();
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t ticket = ++submitted_;
    queue_.push_back({ticket, &fork});
    ready_.notify_all();
    done_.wait(lock, [&] { return results_.count(ticket) > 0; });
    Status status = results_[ticket];
    results_.erase(ticket);
    return status;
  }

 private:
  ForkThread() : thread_([this] { Loop(); }) {}
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [&] { return !queue_.empty(); });
      const auto [ticket, fork] = queue_.front();
      queue_.pop_front();
      lock.unlock();
      Status status = (*fork)();
      lock.lock();
      results_.emplace(ticket, std::move(status));
      done_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_, done_;
  std::deque<std::pair<uint64_t, const std::function<Status()>*>> queue_;
  std::map<uint64_t, Status> results_;
  uint64_t submitted_ = 0;
  std::thread thread_;
};

}  // namespace

Status ChildProcess::Spawn(const SpawnOptions& options, ChildProcess* out) {
  return ForkThread::Get().Run([&] { return SpawnHere(options, out); });
}

Status ChildProcess::SpawnHere(const SpawnOptions& options, ChildProcess* out) {
  if (options.argv.empty())
    return Status::InvalidArgument("spawn: expected a program in argv, found none");
  // Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  // The environment too: setenv() after fork could deadlock on a lock another thread held.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [k, v] : options.env) overridden = overridden || k == key;
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : options.env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const std::string exec_failed = fmt::format("servesweep: cannot execute '{}': ", options.argv[0]);
  int log_fd = -1;
  if (!options.log_path.empty()) {
    log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return Status::Internal(fmt::format("spawn {}: cannot open log {}: {}", options.argv[0],
                                          options.log_path, std::strerror(errno)));
    }
  }
  int err_fd = -1;
  if (!options.stderr_path.empty()) {
    err_fd = ::open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (err_fd < 0) {
      if (log_fd >= 0) ::close(log_fd);
      return Status::Internal(fmt::format("spawn {}: cannot open {}: {}", options.argv[0],
                                          options.stderr_path, std::strerror(errno)));
    }
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    if (err_fd >= 0) ::close(err_fd);
    return Status::Internal(
        fmt::format("spawn {}: fork failed: {}", options.argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may block signals for a sigwait thread; the engine must receive them.
    sigset_t all;
    ::sigfillset(&all);
    ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
    if (::getppid() != parent) ::_exit(127);  // parent died before prctl took effect
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
    ::execvpe(argv[0], argv.data(), envp.data());
    // Say why in the log, with write(2) only (async-signal-safe).
    const char* why = ::strerror(errno);
    [[maybe_unused]] ssize_t ignored =
        ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    ignored = ::write(STDERR_FILENO, why, ::strlen(why));
    ignored = ::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so Signal() works before the child runs
  if (log_fd >= 0) ::close(log_fd);
  if (err_fd >= 0) ::close(err_fd);
  *out = ChildProcess();
  out->pid_ = pid;
  return Status::Ok();
}

std::optional<int> ChildProcess::Poll() {
  if (exit_status_ || !started()) return exit_status_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) exit_status_ = status;
  return exit_status_;
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Poll()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_status_;
}

void ChildProcess::Signal(int signal) {
  if (started() && !exit_status_) ::kill(-pid_, signal);
}

int ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (!started()) return 0;
  if (!Poll()) {
    Signal(SIGTERM);
    if (!Wait(grace)) {
      Signal(SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exit_status_ = status;
    }
  }
  ::kill(-pid_, SIGKILL);  // stragglers the child forked into its group
  return *exit_status_;
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exit {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return fmt::format("signal {}", WTERMSIG(wait_status));
  return fmt::format("status {}", wait_status);
}

std::string SelfExecutable() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "servesweep";
  return std::string(buffer, static_cast<size_t>(n));
}

std::string TailOfFile(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(std::move(line));
    if (lines.size() > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace servesweep
