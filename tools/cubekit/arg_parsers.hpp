#pragma once
// Parsers of the CLI's small argument syntaxes (fuzzed by fuzz/fuzz_arguments.cpp): WIDTHxHEIGHT
// sizes and X,Y,W,H windows. Strict: decimal digits only, no signs, blanks or trailing text; every
// error is InvalidInput naming the flag and the text.
#include <array>
#include <string>
#include <utility>

namespace cubekit::cli {

/// "WxH", both positive integers (lower-case x): --size, --tile-size. `example` completes the message.
std::pair<int, int> parse_width_height(const std::string& text, const std::string& flag, const std::string& example);

/// "X,Y,W,H": a window's top-left corner (>= 0) and size (> 0), four integers (--crop). Whether it
/// fits the image is the crop's own check.
std::array<int, 4> parse_crop(const std::string& text, const std::string& flag);

}  // namespace cubekit::cli
