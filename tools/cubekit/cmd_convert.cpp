// cubekit convert: change format, layout, element type, band subset or spatial window.
#include <iostream>
#include <memory>
#include <sstream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

Action add_convert(CLI::App& root) {
    struct Args {
        CommonOptions common;
        std::string input, output, layout, out_type, crop;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand("convert", "Convert between formats, layouts and element types; select bands; crop");
    app->footer("Examples:\n"
                "  cubekit convert scene.mat scene.hdr --var data --layout bip      # ENVI, pixel-interleaved\n"
                "  cubekit convert data/samson/samson_1.img rgb.png --bands 85,50,10 --out-type u8\n"
                "  cubekit convert scene.hdr window.npy --crop 10,20,64,64 --out-type f32\n"
                "Output format from OUT's extension: .hdr/.img/.dat/.raw (ENVI), .npy, .png, .pgm/.ppm.");
    app->add_option("IN", args->input, "input cube or image")->required();
    app->add_option("OUT", args->output, "output file; written atomically")->required();
    app->add_option("--layout", args->layout, "ENVI interleave of the output: bsq, bil or bip (default: the input's)");
    app->add_option("--out-type", args->out_type, "element type: u8, u16, i16, u32, i32, f32, f64 (rounded, saturated)");
    app->add_option("--crop", args->crop, "spatial window X,Y,W,H (0-based top-left corner, then size)");
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    return [args] {
        const CommonOptions& common = args->common;
        const auto start = std::chrono::steady_clock::now();
        const FileFormat out_format = output_format(args->output);  // refuse a bad OUT before reading
        const Context ctx = make_context(common, "convert");  // validates --backend/--device; conversion is I/O
        Cube cube = read_cube(args->input, {.var = common.var});
        const CubeShape in_shape = cube.shape();
        if (!common.bands.empty()) cube = cube.select_bands(parse_band_list(common.bands, cube.bands(), "--bands"));
        if (!args->crop.empty()) {
            int v[4];
            char c1, c2, c3;
            std::istringstream s(args->crop);
            if (!(s >> v[0] >> c1 >> v[1] >> c2 >> v[2] >> c3 >> v[3]) || c1 != ',' || c2 != ',' || c3 != ',' || !s.eof())
                throw InvalidInput("--crop = '" + args->crop + "': expected X,Y,W,H (four integers)");
            cube = cube.crop(v[0], v[1], v[2], v[3]);
        }
        if (!args->out_type.empty()) cube = cube.to_dtype(parse_dtype(args->out_type, "--out-type"));
        WriteOptions wo{.format = out_format, .png_compression = common.write.png_compression};
        if (!args->layout.empty()) {
            const Layout l = parse_enum<Layout>(args->layout, "--layout");
            cube = cube.to_layout(l);
        }
        write_cube(cube, args->output, wo);
        say(common, "convert: " + args->input + " (" + in_shape.describe() + ") -> " + args->output + " (" +
                        cube.shape().describe() + ", " + std::string(format_name(out_format)) + ")");
        nlohmann::json j = {{"command", "convert"}, {"input", args->input}, {"output", args->output},
                            {"format", std::string(format_name(out_format))}, {"input_shape", shape_json(in_shape)},
                            {"output_shape", shape_json(cube.shape())}, {"timings_ms", {{"total", elapsed_ms(start)}}}};
        emit_json(common, j);
    };
}

}  // namespace cubekit::cli
