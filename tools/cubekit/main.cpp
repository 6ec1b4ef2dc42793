// cubekit: GPU analysis of image cubes. Parses the subcommand, runs it, and turns every error
// into one line on stderr and an exit code: 2 invalid input or usage, 3 the operating system
// refused, 4 device failure. This is the one place exceptions are translated.
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <new>
#include <string_view>

#include "batch_worker.hpp"
#include "commands.hpp"
#include "interrupt.hpp"
#include "cubekit/error.hpp"
#include "option_flags.hpp"
#include "timings.hpp"

namespace {

int run_cli(int argc, char** argv) {
    CLI::App app{"cubekit: GPU analysis of hyperspectral, multispectral, RGB and grayscale image cubes.\n"
                 "Example: cubekit rcmg data/samson/samson_1.img gradient.png --json",
                 "cubekit"};
    app.set_version_flag("--version", std::string("cubekit ") + CUBEKIT_VERSION);
    app.require_subcommand(1);
    app.footer("Exit codes: 0 success; 2 invalid file content or parameter; 3 the operating system refused\n"
               "(missing file, permission, disk full); 4 device failure; 130 interrupted (SIGINT/SIGTERM).\n"
               "Run 'cubekit SUBCOMMAND --help' for details.");
    std::map<CLI::App*, cubekit::cli::Action> actions;
    auto add = [&](cubekit::cli::Action (*adder)(CLI::App&)) {
        const std::size_t before = app.get_subcommands({}).size();
        cubekit::cli::Action action = adder(app);
        actions[app.get_subcommands({}).at(before)] = std::move(action);
    };
    add(cubekit::cli::add_info);
    add(cubekit::cli::add_convert);
    add(cubekit::cli::add_rcmg);
    add(cubekit::cli::add_quantize);
    add(cubekit::cli::add_cluster);
    add(cubekit::cli::add_edges);
    add(cubekit::cli::add_edges_baseline);
    add(cubekit::cli::add_edges_score);
    add(cubekit::cli::add_pca);
    add(cubekit::cli::add_zernike);
    add(cubekit::cli::add_zernike_reconstruct);
    add(cubekit::cli::add_detect);
    add(cubekit::cli::add_detect_score);
    add(cubekit::cli::add_train);
    add(cubekit::cli::add_synth);
    add(cubekit::cli::add_classify);
    add(cubekit::cli::add_watershed);
    add(cubekit::cli::add_segment);
    add(cubekit::cli::add_batch);
    add(cubekit::cli::add_demo);

    if (argc > 1 && argv[1][0] != '-') {
        bool known = false;
        for (const auto& [sub, action] : actions) known |= sub->check_name(argv[1]);
        if (!known) {
            std::cerr << "cubekit: unknown subcommand '" << argv[1] << "' (see cubekit --help for the list)\n";
            return 2;
        }
    }
    // "--flag=" with nothing after '=': CLI11 would take the next argument as the value (`--var= --json`
    // made "--json" the variable name). Refused here, naming the flag.
    for (int i = 1; i < argc; ++i) {
        const std::string_view a(argv[i]);
        if (a.starts_with("--") && a.size() > 3 && a.back() == '=' && a.find('=') == a.size() - 1) {
            std::cerr << "cubekit: " << a.substr(0, a.size() - 1) << ": an empty value after '='; give a value or leave the flag out\n";
            return 2;
        }
    }
    // An empty value ('--bands ""', an empty file name) would silently mean the default or nothing.
    for (int i = 2; i < argc; ++i) {
        if (argv[i][0] != '\0') continue;
        const std::string_view before(argv[i - 1]);
        std::cerr << "cubekit: argument " << i << " is empty";
        if (before.starts_with("-") && before.size() > 1) std::cerr << " (after " << before << ")";
        std::cerr << "; give a value (a file name, a number) or leave the flag out\n";
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        std::cerr << "cubekit: " << e.what() << "\n";
        return 2;
    }
    CLI::App* running = nullptr;
    try {
        for (CLI::App* sub : app.get_subcommands()) {
            running = sub;
            // A nested subcommand (`detect rx`) owns the flags that messages name.
            for (CLI::App* inner = sub; inner; inner = inner->get_subcommands().empty() ? nullptr : inner->get_subcommands()[0])
                running = inner;
            actions.at(sub)();
        }
        if (cubekit::cli::interrupted()) {  // the signal came too late to stop the work
            std::cerr << "cubekit: interrupted by " << cubekit::cli::interrupt_name() << " after the work had finished (its outputs are complete)\n";
            return 130;
        }
        return 0;
    } catch (const cubekit::cli::BatchFailed& e) {
        return e.code;
    } catch (const cubekit::InvalidInput& e) {
        // Library messages name option fields (max_iter); say them as this subcommand's flags (--max-iter).
        std::cerr << "cubekit: " << (running ? cubekit::cli::with_flag_names(*running, e.what()) : e.what()) << "\n";
        return 2;
    } catch (const cubekit::IoError& e) {
        std::cerr << "cubekit: " << e.what() << "\n";
        return 3;
    } catch (const cubekit::DeviceError& e) {
        std::cerr << "cubekit: " << e.what() << "\n";
        return 4;
    } catch (const cubekit::Cancelled& e) {
        if (cubekit::cli::interrupted())
            std::cerr << "cubekit: interrupted by " << cubekit::cli::interrupt_name() << "; stopped, nothing written\n";
        else
            std::cerr << "cubekit: " << e.what() << "\n";
        return 130;
    } catch (const std::bad_alloc&) {
        std::cerr << "cubekit: out of host memory\n";
        return 3;
    } catch (const std::exception& e) {
        std::cerr << "cubekit: internal error: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    cubekit::cli::mark_main_entry();  // where --json timings_ms "total" starts and "startup" ends
    cubekit::cli::install_interrupt_handling();  // before any thread starts: all inherit the blocked signals
    // The worker processes of `cubekit batch` (batch_worker.hpp), not a command for users.
    if (argc == 2 && std::string_view(argv[1]) == "__batch-worker") return cubekit::cli::serve_batch_worker(run_cli);
    return run_cli(argc, argv);
}
