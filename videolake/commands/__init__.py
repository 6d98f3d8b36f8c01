"""CLI subcommands: each module defines add_arguments(parser) and run(args); heavy imports stay inside run()."""
