// The region table of `cubekit segment --regions-out` (region_table.hpp).
#include "region_table.hpp"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "cubekit/io.hpp"
#include "cubekit/options.hpp"

namespace cubekit::cli {

namespace {

nlohmann::ordered_json regions_json(const std::vector<RegionStats>& stats) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const RegionStats& r : stats) {
        nlohmann::ordered_json row;
        row["label"] = r.label;
        row["area"] = r.area;
        row["x0"] = r.x0, row["y0"] = r.y0, row["x1"] = r.x1, row["y1"] = r.y1;
        row["centroid_x"] = r.centroid_x, row["centroid_y"] = r.centroid_y;
        row["mean_gradient"] = std::isnan(r.mean_gradient) ? nlohmann::ordered_json() : nlohmann::ordered_json(r.mean_gradient);
        row["mean_spectrum"] = r.mean_spectrum;
        rows.push_back(row);
    }
    return rows;
}

std::string regions_csv(const std::vector<RegionStats>& stats, const std::vector<std::string>& band_names) {
    std::string s = "label,area,x0,y0,x1,y1,centroid_x,centroid_y,mean_gradient";
    const auto cell = [&s](const std::string& text) { s.append(1, ',').append(text); };
    for (const std::string& n : band_names) cell(n);
    s.append(1, '\n');
    for (const RegionStats& r : stats) {
        s.append(std::to_string(r.label));
        for (std::int64_t v : {r.area, std::int64_t(r.x0), std::int64_t(r.y0), std::int64_t(r.x1), std::int64_t(r.y1)})
            cell(std::to_string(v));
        for (double v : {r.centroid_x, r.centroid_y, r.mean_gradient}) cell(number_text(v));
        for (double v : r.mean_spectrum) cell(number_text(v));
        s.append(1, '\n');
    }
    return s;
}

}  // namespace

void write_region_table(const std::string& path, const std::string& input, const std::string& labels,
                        const std::vector<int>& bands, const Metadata& metadata, const std::vector<RegionStats>& stats,
                        OutputList& written) {
    const std::vector<double>& wl = metadata.wavelengths;
    const bool named = wl.size() == bands.size();
    if (std::filesystem::path(path).extension() == ".json") {
        nlohmann::ordered_json table;
        table["input"] = input;
        table["labels"] = labels;
        table["count"] = stats.size();
        table["bands"] = bands;
        table["wavelengths"] = named ? nlohmann::ordered_json(wl) : nlohmann::ordered_json();
        table["regions"] = regions_json(stats);
        write_text_file(path, readable_json(table));
        written.add(path, "regions", "json");
        return;
    }
    std::vector<std::string> names;
    for (std::size_t b = 0; b < bands.size(); ++b)
        names.push_back(named ? number_text(wl[b]) : "b" + std::to_string(bands[b]));
    write_text_file(path, regions_csv(stats, names));
    written.add(path, "regions", "csv");
}

}  // namespace cubekit::cli
