#pragma once
// What the detection commands write beside their score maps: an RGB (or gray) composite of the
// cube with boxes drawn on it, and the object table as JSON and CSV.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

/// A W×H×3 u8 BSQ picture of the cube: the bands nearest 640, 550 and 460 nm when the cube has
/// wavelengths in nm, else the bands at 75 %, 50 % and 25 % of the band range (one band: gray);
/// each channel stretched from its 2nd to its 98th percentile.
Cube composite_rgb(const Cube& cube);
/// The same picture from a cube file, reading only its three (or one) bands (CubeFile::read_bands).
Cube composite_rgb(const CubeFile& file);

/// A box to draw: [x0, x0+width) × [y0, y0+height).
struct Box {
    int x0 = 0, y0 = 0, width = 0, height = 0;
};

/// Draws 1-pixel outlines in `rgb` (u8, 3 bands) in the colour (r, g, b).
void draw_boxes(Cube& rgb, const std::vector<Box>& boxes, int r = 255, int g = 40, int b = 40);

/// The object table as JSON rows and as CSV text (one header line, one line per object).
nlohmann::json objects_json(const std::vector<DetectedObject>& objects);
std::string objects_csv(const std::vector<DetectedObject>& objects);

/// The window list of the multi-resolution detector as JSON rows and CSV text.
nlohmann::json windows_json(const std::vector<Window>& windows);
std::string windows_csv(const std::vector<Window>& windows);

}  // namespace cubekit::cli
