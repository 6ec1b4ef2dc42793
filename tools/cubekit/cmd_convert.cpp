// cubekit convert: change format, layout, element type, band subset or spatial window.
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "arg_parsers.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

/// What convert changes besides the bands and the window; unset = as the input has it.
struct ConvertOptions {
    std::optional<Layout> layout;
    std::optional<DType> out_type;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ConvertOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.layout, Field{.name = "layout", .doc = "ENVI interleave of the output: bsq, bil or bip (default: the input's)"});
    visit(o.out_type, Field{.name = "out_type", .doc = "element type: u8, u16, i16, u32, i32, f32, f64 (rounded, saturated)",
                            .aliases = true});  // NumPy's names too: float32, uint8, ...
}

namespace {

struct ConvertArgs {
    CommonOptions common;
    ConvertOptions options;
    std::string input, output, crop;
};

/// The cube as OUT gets it: --bands, --crop, --out-type, --layout applied in that order.
Cube converted(Cube cube, const ConvertArgs& a) {
    if (!a.common.bands.empty()) cube = cube.select_bands(parse_band_list(a.common.bands, cube.bands(), "bands"));
    if (!a.crop.empty()) {
        const std::array<int, 4> v = parse_crop(a.crop, "--crop");
        cube = cube.crop(v[0], v[1], v[2], v[3]);
    }
    if (a.options.out_type) cube = cube.to_dtype(*a.options.out_type);
    if (a.options.layout) cube = cube.to_layout(*a.options.layout);
    return cube;
}

void convert_command(const ConvertArgs& a) {
    const CommonOptions& common = a.common;
    Timings timings;
    const FileFormat out_format = output_format(a.output);  // refuse a bad OUT before reading
    check_output_folder(a.output);
    // Converting runs on the CPU: without --backend cuda or --device no CUDA context is made (its start
    // and exit cost ~0.3 s on the GPU machine); with either, the context is made and checks them.
    CommonOptions flags = common;
    if (flags.context.backend == Backend::Auto && flags.context.device < 0) flags.context.backend = Backend::Cpu;
    const Context ctx = timings.time("context", [&] { return make_context(flags, "convert"); });
    Cube cube = timings.time("read", [&] { return read_cube(a.input, common.read); });
    const CubeShape in_shape = cube.shape();
    cube = timings.time("convert", [&] { return converted(std::move(cube), a); });
    const WriteOptions wo{.format = out_format, .png_compression = common.write.png_compression};
    timings.time("write", [&] { write_cube(cube, a.output, wo); });
    say(common, "convert: " + a.input + " (" + in_shape.describe() + ") -> " + a.output + " (" +
                    cube.shape().describe() + ", " + std::string(format_name(out_format)) + ")");
    nlohmann::json j = {{"command", "convert"}, {"input", a.input}, {"output", a.output},
                        {"format", std::string(format_name(out_format))}, {"input_shape", shape_json(in_shape)},
                        {"output_shape", shape_json(cube.shape())}};
    emit_json(common, j, timings);
}

}  // namespace

Action add_convert(CLI::App& root) {
    auto args = std::make_shared<ConvertArgs>();
    CLI::App* app = root.add_subcommand("convert", "Convert between formats, layouts and element types; select bands; crop");
    app->footer("Examples:\n"
                "  cubekit convert scene.mat scene.hdr --var data --layout bip      # ENVI, pixel-interleaved\n"
                "  cubekit convert data/samson/samson_1.img rgb.png --bands 85,50,10 --out-type u8\n"
                "  cubekit convert scene.hdr window.npy --crop 10,20,64,64 --out-type f32\n"
                "Output format from OUT's extension: .hdr/.img/.dat/.raw (ENVI), .npy, .png, .pgm/.ppm.");
    input_file(app->add_option("IN", args->input, "input cube or image"))->required();
    app->add_option("OUT", args->output, "output file; written atomically")->required();
    bind_flags(*app, args->options);  // --layout, --out-type
    app->add_option("--crop", args->crop, "spatial window X,Y,W,H (0-based top-left corner, then size)");
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    return [args] { convert_command(*args); };
}

}  // namespace cubekit::cli
