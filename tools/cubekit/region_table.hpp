#pragma once
// The region table of `cubekit segment --regions-out`: a row per region (label, area, box, centroid,
// mean gradient, mean spectrum) as JSON (with the input, the labels file, the bands and their
// wavelengths) or CSV (a column per band, named by its wavelength when the input has one per band).
#include <string>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/watershed.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

/// Writes `stats` to `path` (.json or .csv by its extension) and lists it in `written` as "regions".
/// `input` and `labels` are the run's file names (JSON), `bands` the input band of each spectrum
/// column, `metadata` the input's (its wavelengths name the columns).
void write_region_table(const std::string& path, const std::string& input, const std::string& labels,
                        const std::vector<int>& bands, const Metadata& metadata, const std::vector<RegionStats>& stats,
                        OutputList& written);

}  // namespace cubekit::cli
