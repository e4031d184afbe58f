#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <string>

namespace servesweep {

void SetupLogging(std::string_view role, std::string_view level) {
  auto logger = spdlog::stderr_logger_mt(std::string(role) + "-" + std::to_string(::getpid()));
  logger->set_pattern("%H:%M:%S.%e %n %^%l%$ %v");
  auto parsed = spdlog::level::from_str(std::string(level));
  logger->set_level(parsed == spdlog::level::off && level != "off" ? spdlog::level::info : parsed);
  spdlog::set_default_logger(logger);
}

}  // namespace servesweep
