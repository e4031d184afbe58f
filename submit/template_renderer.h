// Renders the templates `servesweep submit` ships (slurm/*.in, k8s/): {{name}} placeholders
// replaced by values. A placeholder without a value is an error naming the template, line and
// name, so templates and code cannot drift apart silently.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace servesweep::submit {

Status RenderTemplate(std::string_view template_name, std::string_view text,
                      const std::map<std::string, std::string>& values, std::string* out);

// The text of a template embedded at build time, by its path in the source tree
// (e.g. "slurm/sweep.sbatch.in"); empty when there is none.
std::string_view EmbeddedTemplate(std::string_view path);
// Every embedded template's path, sorted.
std::vector<std::string_view> EmbeddedTemplatePaths();

// Single-quotes `value` for a POSIX shell.
std::string ShellQuote(const std::string& value);

}  // namespace servesweep::submit
