// The performance model's error as users get it: per kind of extrapolation (calibration.h), the
// interval that held 80% of the figures predicted by fits that never saw them (leave one case
// out, `servesweep calibrate --cross-validate --bands-out`; calibration/cross_validate.h).
// Shipped as profiles/error_bands.yaml; `plan` and simulated runs print a run's band from it.
//
//   measured_by: "bench/perfmodel_cross_validate.sh ..."   # the command
//   measured_at: 2026-12-02
//   bands:                      # predicted / measured - 1, in %
//     - {kind: in range, low_pct: -17.2, high_pct: 58.1, figures: 24, cases: 2}
//     - {kind: other hardware, figures: 0, cases: 0}
//
// A band is known only from kMinBandCases cases of its kind; below that it is unknown, however
// narrow its figures look. Kinds the file does not list are unknown.
//
// Thread-safety: values; ShippedErrorBands() is parsed once, then read-only.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "common/status.h"
#include "perfmodel/calibration.h"

namespace servesweep::perfmodel {

inline constexpr size_t kMinBandCases = 3;

struct KindBand {
  size_t figures = 0, cases = 0;
  double low_pct = 0, high_pct = 0;  // NaN when no figure
  bool known() const { return cases >= kMinBandCases; }
};

struct ErrorBands {
  std::string measured_by, measured_at;
  std::array<KindBand, kExtrapolationKinds> bands{};  // by ExtrapolationKind
  ErrorBands();                                       // every band empty (unknown)
  const KindBand& For(ExtrapolationKind kind) const { return bands[static_cast<int>(kind)]; }
};

// Unknown keys and kinds, a low above its high, are errors with file:line:column.
Status ParseErrorBands(std::string_view yaml, const std::string& origin, ErrorBands* out);
// A file of bands (the format above); errors name the file.
Status LoadErrorBands(const std::string& path, ErrorBands* out);
std::string ErrorBandsYaml(const ErrorBands& bands, const std::string& header_comment);

// profiles/error_bands.yaml as embedded in this build; every band unknown if it is absent.
const ErrorBands& ShippedErrorBands();

}  // namespace servesweep::perfmodel
